import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";

import { FINAL, RETRYABLE, type Run as RunOut, api, isWorkflow, jobLabels } from "../api";
import { Confirm, Notice, Problem, Status, Timeline, When } from "../components";
import { UTC, json, milliseconds, relative } from "../format";
import { usePoll, useNow } from "../hooks";
import { Link, href } from "../router";
import { WorkflowRun } from "../workflow";

/** Characters of a checkpoint's JSON shown at once; a longer one opens on demand. */
const CHECKPOINT_SHOWN = 400;

function Checkpoint({ value }: { value: unknown }) {
  const text = json(value);
  if (text.length <= CHECKPOINT_SHOWN) return <pre class="checkpoint">{text}</pre>;
  return (
    <details class="checkpoint">
      <summary>
        <code>{text.slice(0, 80)}…</code> ({text.length} characters: show all)
      </summary>
      <pre>{text}</pre>
    </details>
  );
}

/** Its progress and stage, as its worker reports them; for a pool run also who holds its lease, its last
 * heartbeat (relative to now), when the lease lapses, whether it was asked to stop, and its last checkpoint. */
function Progress({ run, now, zone }: { run: RunOut; now: number; zone: string }) {
  const reported = run.progress !== undefined && run.progress !== null;
  const hasCheckpoint = run.checkpoint !== undefined && run.checkpoint !== null;
  if (!run.pool && !reported && !run.stage && !hasCheckpoint) return null;
  const running = run.status === "RUNNING";
  const share = Math.min(Math.max(run.progress ?? 0, 0), 1);
  return (
    <section class="card" aria-label="progress">
      <h2>{run.pool ? <>Pool <code>{run.pool}</code></> : "Progress"}</h2>
      {reported ? (
        <p class="progress-line">
          <progress max={1} value={share} aria-label="progress" /> <strong data-field="progress">{Math.round(share * 100)}%</strong>
          {run.stage ? <span data-field="stage-line"> · {run.stage}</span> : null}
        </p>
      ) : run.stage ? (
        <p>{run.stage}</p>
      ) : (
        <p class="muted">No progress reported yet.</p>
      )}
      {run.pool ? (
        <dl class="facts columns">
          <dt>Stage</dt>
          <dd data-field="stage">{run.stage ?? "—"}</dd>
          <dt>Holder</dt>
          <dd data-field="holder">{running && run.lease_owner ? <code>{run.lease_owner}</code> : "—"}</dd>
          <dt>Heartbeat</dt>
          <dd data-field="heartbeat" title={run.heartbeat_at ?? undefined}>
            {run.heartbeat_at ? relative(run.heartbeat_at, now) : running ? "none yet" : "—"}
          </dd>
          <dt>Lease expires</dt>
          <dd data-field="lease-expires">
            {running && run.lease_expires_at ? (
              <>
                <When value={run.lease_expires_at} zone={zone} /> ({relative(run.lease_expires_at, now)})
              </>
            ) : (
              "—"
            )}
          </dd>
          <dt>Attempt cap</dt>
          <dd data-field="lease-deadline">{running && run.lease_deadline ? <When value={run.lease_deadline} zone={zone} /> : "—"}</dd>
          <dt>Cancel requested</dt>
          <dd data-field="cancel-requested">{run.cancel_requested ? "yes: its worker hears it at its next heartbeat" : "no"}</dd>
        </dl>
      ) : null}
      {hasCheckpoint ? (
        <>
          <h3>Last checkpoint</h3>
          <Checkpoint value={run.checkpoint} />
        </>
      ) : null}
    </section>
  );
}

/** One run: its attempts on a timeline and in a table with their errors, its progress and checkpoint when
 * its target reports them, and Retry when it failed for good (a workflow task's run is retried with its
 * workflow run, which runs again its failed and cancelled tasks and those after them). */
export function Run({ id }: { id: string }) {
  const now = useNow(1000);
  const [retrying, setRetrying] = useState(false);
  const [cancelling, setCancelling] = useState(false);
  const [notice, setNotice] = useState<ComponentChildren>(null);
  const run = usePoll(() => api.run(id), 1500, [id]);
  // The run's job names it, and its times are shown in the job's zone.
  const jobId = run.data?.job_id;
  const job = usePoll(async () => (jobId ? ((await jobLabels([jobId])).get(jobId) ?? null) : null), 0, [jobId]);
  // A workflow run's tasks and their dependencies: its job's definition.
  const workflow = Array.isArray(run.data?.tasks);
  const definition = usePoll(
    async () => {
      if (!jobId || !workflow) return null;
      const target = (await api.job(jobId)).target;
      return isWorkflow(target) ? target.tasks : null;
    },
    0,
    [jobId, workflow],
  );

  if (!run.data) {
    return (
      <main>
        <Problem error={run.error} />
        {run.loading ? <p class="muted">Loading…</p> : null}
      </main>
    );
  }
  const data = run.data;
  const final = FINAL.includes(data.status);
  const zone = job.data?.zone ?? UTC;
  // A task's run (`<workflow run id>/<task id>`) names the workflow run it is a task of.
  const cut = data.run_id.lastIndexOf("/");
  const workflowRun = cut > 0 ? data.run_id.slice(0, cut) : null;
  return (
    <main>
      <header class="page-head">
        <div>
          <p class="crumbs">
            <Link href="/runs">Runs</Link> / <Link href={href("/jobs", data.job_id)}>job {job.data?.name ?? data.job_id}</Link> /
            {workflowRun ? (
              <>
                {" "}
                <Link href={href("/runs", workflowRun)}>
                  workflow run {workflowRun.slice(data.job_id.length + 1) || workflowRun}
                </Link>{" "}
                /
              </>
            ) : null}
          </p>
          <h1>
            Run <code class="run-id">{data.run_id.slice(data.job_id.length + 1) || data.run_id}</code>{" "}
            <Status value={data.status} />
          </h1>
        </div>
        <div class="actions">
          {RETRYABLE.includes(data.status) && workflowRun ? (
            <Link href={href("/runs", workflowRun)} data-field="retry-with-workflow-run">
              Retried with its workflow run
            </Link>
          ) : RETRYABLE.includes(data.status) ? (
            <button type="button" onClick={() => setRetrying(true)}>
              Retry
            </button>
          ) : null}
          {!final && !data.cancel_requested ? (
            <button type="button" class="danger" onClick={() => setCancelling(true)}>
              Cancel
            </button>
          ) : null}
        </div>
      </header>
      {notice ? <Notice>{notice}</Notice> : null}
      <Problem error={run.error} />
      <section class="card" aria-label="summary">
        <dl class="facts columns">
          <dt>Run id</dt>
          <dd>
            <code>{data.run_id}</code>
          </dd>
          <dt>Due</dt>
          <dd>
            <When value={data.scheduled_for} zone={zone} />
          </dd>
          <dt>Trigger</dt>
          <dd>{data.trigger}</dd>
          <dt>Lag</dt>
          <dd>{milliseconds(data.lag_ms)}</dd>
          <dt>Started</dt>
          <dd>
            <When value={data.started_at} zone={zone} />
          </dd>
          <dt>Finished</dt>
          <dd>
            <When value={data.finished_at} zone={zone} />
          </dd>
          <dt>Attempts</dt>
          <dd>{data.attempt}</dd>
          {data.manual_retries ? (
            <>
              <dt>Manual retries</dt>
              <dd>{data.manual_retries}</dd>
            </>
          ) : null}
          {data.reason ? (
            <>
              <dt>Reason</dt>
              <dd>{data.reason}</dd>
            </>
          ) : null}
          {data.retry_at && !final ? (
            <>
              <dt>Next attempt</dt>
              <dd>
                <When value={data.retry_at} zone={zone} />
              </dd>
            </>
          ) : null}
        </dl>
      </section>
      <Progress run={data} now={now} zone={zone} />
      {data.tasks ? <WorkflowRun run={data} definition={definition.data} zone={zone} /> : null}
      {data.tasks && !data.attempts.length ? null : (
        <section class="card" aria-label="attempts">
          <h2>Attempts</h2>
          {data.attempts.length ? <Timeline run={data} now={now} zone={zone} /> : <p class="muted">No attempt has started yet.</p>}
          <table class="list" aria-label="attempts">
            <thead>
              <tr>
                <th>#</th>
                <th>Started</th>
                <th>Duration</th>
                <th>Outcome</th>
                <th>Error</th>
                <th>Worker</th>
              </tr>
            </thead>
            <tbody>
              {data.attempts.map((attempt) => (
                <tr key={attempt.attempt} data-attempt={attempt.attempt}>
                  <td data-label="#">{attempt.attempt}</td>
                  <td data-label="Started" class="wide">
                    <When value={attempt.started_at} zone={zone} />
                  </td>
                  <td data-label="Duration">{milliseconds(attempt.duration_ms)}</td>
                  <td data-label="Outcome">
                    {attempt.outcome ? <Status value={attempt.outcome} /> : <Status value="running" />}
                  </td>
                  <td data-label="Error" class="error-text span">
                    {attempt.error_code ? <code>{attempt.error_code}</code> : null} {attempt.error_message ?? ""}
                  </td>
                  <td data-label="Worker" class="span">
                    <code>{attempt.worker_id ?? "—"}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      {cancelling ? (
        <Confirm
          title="Cancel this run?"
          confirm="Cancel run"
          danger
          onClose={() => setCancelling(false)}
          onConfirm={async () => {
            const answer = await api.cancelRun(data.run_id);
            setNotice(
              answer.status === "CANCELLED"
                ? "The run is CANCELLED."
                : "The run was asked to stop: its worker hears it at its next heartbeat, and it ends CANCELLED.",
            );
            await run.reload();
          }}
        >
          <p>
            {data.status === "RUNNING"
              ? "Its worker is asked to stop, at its next heartbeat; the run then ends CANCELLED and is not retried. If it completes first, it is SUCCEEDED."
              : "It has not started: it is CANCELLED now, and never runs."}
          </p>
        </Confirm>
      ) : null}
      {retrying ? (
        <Confirm
          title="Retry this run?"
          confirm="Retry"
          onClose={() => setRetrying(false)}
          onConfirm={async () => {
            const answer = await api.retry(data.run_id);
            setNotice(`Retry queued: the run is ${answer.status}.`);
            await run.reload();
          }}
        >
          {data.workflow ? (
            <p>
              Its failed and cancelled tasks run again, and every task after them; the tasks that succeeded keep their
              outcome and output.
            </p>
          ) : (
            <p>A new attempt of the same run starts, with the same idempotency key ({data.run_id}).</p>
          )}
        </Confirm>
      ) : null}
    </main>
  );
}
