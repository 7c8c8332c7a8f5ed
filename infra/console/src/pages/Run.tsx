import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";

import { FINAL, RETRYABLE, type Run as RunOut, api, jobLabels } from "../api";
import { Confirm, Notice, Problem, Status, Timeline, When } from "../components";
import { UTC, json, milliseconds } from "../format";
import { usePoll, useNow } from "../hooks";
import { Link, href } from "../router";

function Progress({ run }: { run: RunOut }) {
  const reported = run.progress !== undefined && run.progress !== null;
  if (!reported && !run.stage && run.checkpoint === undefined) return null;
  return (
    <section class="card" aria-label="progress">
      <h2>Progress</h2>
      {reported ? (
        <p>
          <progress max={1} value={run.progress ?? 0} /> {Math.round((run.progress ?? 0) * 100)}%
          {run.stage ? ` · ${run.stage}` : ""}
        </p>
      ) : run.stage ? (
        <p>{run.stage}</p>
      ) : null}
      {run.checkpoint !== undefined && run.checkpoint !== null ? (
        <>
          <h3>Last checkpoint</h3>
          <pre>{json(run.checkpoint)}</pre>
        </>
      ) : null}
    </section>
  );
}

/** One run: its attempts on a timeline and in a table with their errors, its progress and checkpoint when
 * its target reports them, and Retry when it failed for good. */
export function Run({ id }: { id: string }) {
  const now = useNow(1000);
  const [retrying, setRetrying] = useState(false);
  const [notice, setNotice] = useState<ComponentChildren>(null);
  const run = usePoll(() => api.run(id), 1500, [id]);
  // The run's job names it, and its times are shown in the job's zone.
  const jobId = run.data?.job_id;
  const job = usePoll(async () => (jobId ? ((await jobLabels([jobId])).get(jobId) ?? null) : null), 0, [jobId]);

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
  return (
    <main>
      <header class="page-head">
        <div>
          <p class="crumbs">
            <Link href="/runs">Runs</Link> / <Link href={href("/jobs", data.job_id)}>job {job.data?.name ?? data.job_id}</Link> /
          </p>
          <h1>
            Run <code class="run-id">{data.run_id.slice(data.job_id.length + 1) || data.run_id}</code>{" "}
            <Status value={data.status} />
          </h1>
        </div>
        <div class="actions">
          {RETRYABLE.includes(data.status) ? (
            <button type="button" onClick={() => setRetrying(true)}>
              Retry
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
      <Progress run={data} />
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
          <p>A new attempt of the same run starts, with the same idempotency key ({data.run_id}).</p>
        </Confirm>
      ) : null}
    </main>
  );
}
