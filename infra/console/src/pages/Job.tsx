import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";

import { type Job as JobOut, type Run, type Target, type WorkflowTarget, api, isWorkflow, newKey } from "../api";
import { Chart, Confirm, Notice, Problem, Status, When } from "../components";
import { jobZone, json, milliseconds, relative } from "../format";
import { usePoll, useNow } from "../hooks";
import { Link, href } from "../router";

type Action = "pause" | "resume" | "trigger" | "cancel";

const HISTORY = 100;

/** How long a run's target took: its last attempt's duration. */
function duration(run: Run): number | null {
  const last = run.attempts[run.attempts.length - 1];
  return last?.duration_ms ?? null;
}

export function chartData(runs: Run[]): [number[], (number | null)[], (number | null)[]] {
  const started = runs
    .filter((run) => run.lag_ms !== null || run.attempts.length)
    .sort((a, b) => a.scheduled_for.localeCompare(b.scheduled_for));
  return [
    started.map((run) => new Date(run.scheduled_for).getTime() / 1000),
    started.map((run) => run.lag_ms),
    started.map(duration),
  ];
}

/** A target in a few words: its type, and the URL or pool it names. */
function TargetSummary({ target }: { target: Target }) {
  if (isWorkflow(target)) return <>workflow, {target.tasks.length} tasks</>;
  const named = target.url ?? (typeof target.pool === "string" ? target.pool : null);
  return (
    <>
      {target.type} {named ? <code>{named}</code> : null}
    </>
  );
}

/** A workflow's tasks in the order they are defined, each with what it waits for and its trigger rule. */
export function WorkflowTasks({ target }: { target: WorkflowTarget }) {
  return (
    <section class="card" aria-label="workflow tasks">
      <h2>Tasks</h2>
      <p class="muted">
        {target.failure_mode === "continue"
          ? "After a failure, every task that can still run runs."
          : "After a failure, tasks not started are cancelled; those running finish."}
        {target.max_parallel ? ` At most ${target.max_parallel} tasks run at once.` : ""}
      </p>
      <table class="list" aria-label="tasks">
        <thead>
          <tr>
            <th>Task</th>
            <th>Target</th>
            <th>Depends on</th>
            <th>Runs when</th>
          </tr>
        </thead>
        <tbody>
          {target.tasks.map((task) => (
            <tr key={task.id} data-task-id={task.id}>
              <td data-label="Task">
                <code>{task.id}</code>
              </td>
              <td data-label="Target">
                <TargetSummary target={task.target} />
              </td>
              <td data-label="Depends on">
                {task.depends_on.length ? task.depends_on.map((parent) => <code class="tag">{parent}</code>) : <span class="muted">nothing: starts first</span>}
              </td>
              <td data-label="Runs when">{task.depends_on.length ? task.trigger_rule.replace("_", " ") : "-"}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** One job: its schedule in words, its next fires, its run history with lag and duration, and the actions. */
export function Job({ id }: { id: string }) {
  const now = useNow(1000);
  const [action, setAction] = useState<Action | null>(null);
  const [reason, setReason] = useState("");
  const [notice, setNotice] = useState<ComponentChildren>(null);

  const job = usePoll(() => api.job(id), 3000, [id]);
  const runs = usePoll(() => api.jobRuns(id, { limit: HISTORY }), 2000, [id]);
  const status = job.data?.status;
  const schedule = job.data ? JSON.stringify(job.data.schedule) : "";
  // A few more than shown, asked for now and then: those passed meanwhile drop off the list.
  const fires = usePoll(
    async () => {
      if (!job.data || status !== "ACTIVE") return null;
      return api.preview(job.data.schedule, 25, job.data.jitter_seconds);
    },
    10_000,
    [schedule, status],
  );
  const upcoming = (fires.data?.fires ?? []).filter((fire) => new Date(fire.at).getTime() >= now - 1000).slice(0, 5);

  const done = (text: ComponentChildren) => async (answer: JobOut | Run) => {
    setNotice(text);
    await Promise.all([job.reload(), runs.reload()]);
    return answer;
  };

  const act: Record<Action, () => Promise<void>> = {
    pause: async () => {
      await api.pause(id, reason.trim() || null).then(done("Paused: no fire starts until it is resumed."));
    },
    resume: async () => {
      await api.resume(id).then(done("Resumed: fires missed while paused follow the misfire policy."));
    },
    trigger: async () => {
      const run = await api.trigger(id, newKey());
      await done(
        <>
          Triggered: run <Link href={href("/runs", run.run_id)}>{run.run_id}</Link>.
        </>,
      )(run);
    },
    cancel: async () => {
      await api.cancel(id).then(done("Cancelled: planned runs are cancelled; a running attempt finishes."));
    },
  };

  if (!job.data) {
    return (
      <main>
        <Problem error={job.error} />
        {job.loading ? <p class="muted">Loading…</p> : null}
      </main>
    );
  }
  const data = job.data;
  const zone = jobZone(data);
  const items = runs.data?.items ?? [];
  return (
    <main>
      <header class="page-head">
        <div>
          <p class="crumbs">
            <Link href="/jobs">Jobs</Link> /
          </p>
          <h1>
            {data.name} <Status value={data.status} />
          </h1>
        </div>
        <div class="actions" role="toolbar" aria-label="job actions">
          {data.status === "ACTIVE" ? (
            <button type="button" onClick={() => setAction("pause")}>
              Pause
            </button>
          ) : null}
          {data.status === "PAUSED" ? (
            <button type="button" onClick={() => setAction("resume")}>
              Resume
            </button>
          ) : null}
          {data.status === "ACTIVE" || data.status === "PAUSED" ? (
            <>
              <button type="button" onClick={() => setAction("trigger")}>
                Trigger now
              </button>
              <button type="button" class="danger" onClick={() => setAction("cancel")}>
                Cancel job
              </button>
            </>
          ) : null}
        </div>
      </header>
      {notice ? <Notice>{notice}</Notice> : null}
      <Problem error={job.error} />
      <div class="two-columns">
        <section class="card" aria-label="schedule">
          <h2>Schedule</h2>
          <p class="description" data-testid="schedule-description">
            {data.schedule_description}
          </p>
          {data.pause ? (
            <p class="paused" data-testid="pause">
              Paused <When value={data.pause.paused_at} zone={zone} /> by {data.pause.paused_by}
              {data.pause.reason ? `: “${data.pause.reason}”` : ""}
            </p>
          ) : null}
          <h3>Next fires</h3>
          {status === "ACTIVE" && fires.data ? (
            upcoming.length ? (
              <ol class="fires" aria-label="next fires">
                {upcoming.map((fire) => (
                  <li class={fire.excluded ? "excluded" : ""}>
                    <When value={fire.at} zone={zone} /> <span class="muted">({relative(fire.at, now)})</span>
                    {fire.dst ? <span class="tag">DST {fire.dst}</span> : null}
                    {fire.excluded ? <span class="tag">excluded: {fire.excluded}</span> : null}
                  </li>
                ))}
              </ol>
            ) : (
              <p class="muted">No fire after now.</p>
            )
          ) : (
            <p class="muted">{status === "PAUSED" ? "None while paused." : "None: the job is " + status?.toLowerCase() + "."}</p>
          )}
        </section>
        <section class="card" aria-label="details">
          <h2>Details</h2>
          <dl class="facts">
            <dt>Job id</dt>
            <dd>
              <code>{data.job_id}</code>
            </dd>
            <dt>Target</dt>
            <dd>
              <TargetSummary target={data.target} />
            </dd>
            <dt>Retries</dt>
            <dd>
              {data.retry.max_attempts} attempts, first delay {data.retry.initial_delay_seconds} s
            </dd>
            <dt>Policies</dt>
            <dd>
              misfire {data.misfire_policy}, overlap {data.overlap_policy}
              {data.jitter_seconds ? `, jitter ${data.jitter_seconds} s` : ""}, priority {data.priority}
            </dd>
            <dt>Created</dt>
            <dd>
              <When value={data.created_at} zone={zone} />
            </dd>
            {data.cancelled_at ? (
              <>
                <dt>Cancelled</dt>
                <dd>
                  <When value={data.cancelled_at} zone={zone} />
                </dd>
              </>
            ) : null}
            <dt>Payload</dt>
            <dd>
              <pre>{json(data.payload)}</pre>
            </dd>
          </dl>
        </section>
      </div>
      {isWorkflow(data.target) ? <WorkflowTasks target={data.target} /> : null}
      <section class="card" aria-label="run history">
        <h2>Runs</h2>
        <Chart
          title="Lag (due to first start) and duration (last attempt), by time due"
          zone={zone}
          data={chartData(items)}
          series={[
            { label: "lag", stroke: "#2563eb" },
            { label: "duration", stroke: "#d97706" },
          ]}
        />
        <Problem error={runs.error} />
        <table class="list" aria-label="runs">
          <thead>
            <tr>
              <th>Due</th>
              <th>Status</th>
              <th>Trigger</th>
              <th>Attempts</th>
              <th>Lag</th>
              <th>Duration</th>
              <th>Run</th>
            </tr>
          </thead>
          <tbody>
            {items.map((run) => (
              <tr key={run.run_id} data-run-id={run.run_id}>
                <td data-label="Due" class="wide">
                  <When value={run.scheduled_for} zone={zone} />
                </td>
                <td data-label="Status">
                  <Status value={run.status} />
                </td>
                <td data-label="Trigger">{run.trigger}</td>
                <td data-label="Attempts">{run.attempt}</td>
                <td data-label="Lag">{milliseconds(run.lag_ms)}</td>
                <td data-label="Duration">{milliseconds(duration(run))}</td>
                <td data-label="Run" class="wide">
                  <Link href={href("/runs", run.run_id)}>{run.run_id.slice(data.job_id.length + 1) || run.run_id}</Link>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {!runs.loading && !items.length ? <p class="empty">No runs yet.</p> : null}
      </section>
      {action === "pause" ? (
        <Confirm title={`Pause ${data.name}?`} confirm="Pause" onConfirm={act.pause} onClose={() => setAction(null)}>
          <p>No fire starts while it is paused, including fires already queued. On resume, the fires missed meanwhile follow its misfire policy ({data.misfire_policy}).</p>
          <label for="reason">Reason (kept with the job)</label>
          <input id="reason" name="reason" value={reason} onInput={(event) => setReason(event.currentTarget.value)} />
        </Confirm>
      ) : null}
      {action === "resume" ? (
        <Confirm title={`Resume ${data.name}?`} confirm="Resume" onConfirm={act.resume} onClose={() => setAction(null)}>
          <p>Fires missed while paused follow its misfire policy ({data.misfire_policy}).</p>
        </Confirm>
      ) : null}
      {action === "trigger" ? (
        <Confirm title={`Run ${data.name} now?`} confirm="Trigger" onConfirm={act.trigger} onClose={() => setAction(null)}>
          <p>A manual run starts now, outside the schedule, with the job's target, payload and retries.</p>
        </Confirm>
      ) : null}
      {action === "cancel" ? (
        <Confirm
          title={`Cancel ${data.name}?`}
          confirm="Cancel job"
          danger
          onConfirm={act.cancel}
          onClose={() => setAction(null)}
        >
          <p>The job will never fire again, and this cannot be undone. Planned runs become CANCELLED; a running attempt finishes.</p>
        </Confirm>
      ) : null}
    </main>
  );
}
