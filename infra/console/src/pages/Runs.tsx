import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";

import { RETRYABLE, RUN_STATUSES, type Run, api, jobNames } from "../api";
import { Confirm, Notice, Problem, Status } from "../components";
import { milliseconds, when } from "../format";
import { usePoll } from "../hooks";
import { Link, href, navigate, useLocation } from "../router";

const SINCE: Record<string, number> = { "": 0, "1h": 3600, "24h": 86400, "7d": 7 * 86400 };
const DEAD_LETTERS = ["FAILED", "DEAD"];

function lastError(run: Run): string {
  const failed = [...run.attempts].reverse().find((attempt) => attempt.error_code || attempt.error_message);
  if (!failed) return run.reason ?? "";
  return [failed.error_code, failed.error_message].filter(Boolean).join(": ");
}

/** Runs across the tenant. Without a choice of statuses it is the dead-letter view: FAILED and DEAD runs,
 * each with Retry (a new attempt of the same run, with the same idempotency key). */
export function Runs() {
  const location = useLocation();
  // No status parameter: the dead-letter view; an empty one ("status="): every status.
  const chosen = location.query.getAll("status");
  const statuses = chosen.length ? chosen.filter(Boolean) : DEAD_LETTERS;
  const jobId = location.query.get("job_id") ?? "";
  const since = location.query.get("since") ?? "";
  const [retrying, setRetrying] = useState<Run | null>(null);
  const [notice, setNotice] = useState<ComponentChildren>(null);
  const [more, setMore] = useState<{ items: Run[]; cursor: string | null } | null>(null);
  const keys = [statuses.join(","), jobId, since];

  const query = () => ({
    status: statuses,
    job_id: jobId || undefined,
    since: SINCE[since] ? new Date(Date.now() - SINCE[since] * 1000).toISOString() : undefined,
    limit: 50,
  });
  const first = usePoll(() => api.runs(query()), 3000, keys);
  const names = usePoll(jobNames, 30_000, []);
  const cursor = more ? more.cursor : (first.data?.next_cursor ?? null);
  const loadMore = async () => {
    if (!cursor) return;
    const page = await api.runs({ ...query(), cursor });
    setMore({ items: [...(more?.items ?? []), ...page.items], cursor: page.next_cursor });
  };

  const filter = (next: { status?: string[]; job_id?: string; since?: string }) => {
    const parameters = new URLSearchParams();
    const wanted = next.status ?? statuses;
    for (const value of wanted.length ? wanted : [""]) parameters.append("status", value);
    const job = next.job_id ?? jobId;
    if (job) parameters.set("job_id", job);
    const window = next.since ?? since;
    if (window) parameters.set("since", window);
    setMore(null);
    navigate(`/runs?${parameters.toString()}`, { replace: true });
  };
  const toggle = (status: string) =>
    filter({ status: statuses.includes(status) ? statuses.filter((one) => one !== status) : [...statuses, status] });

  const seen = new Set<string>();
  const runs = [...(first.data?.items ?? []), ...(more?.items ?? [])].filter(
    (run) => !seen.has(run.run_id) && seen.add(run.run_id),
  );
  const deadLetters = statuses.length > 0 && statuses.every((status) => RETRYABLE.includes(status as Run["status"]));

  return (
    <main>
      <header class="page-head">
        <h1>{deadLetters ? "Dead letters" : "Runs"}</h1>
        <nav class="actions" aria-label="views">
          <Link href="/runs">Dead letters</Link>
          <Link href="/runs?status=">All runs</Link>
        </nav>
      </header>
      <p class="muted">
        {deadLetters
          ? "Runs that failed for good (FAILED: a permanent error; DEAD: retries exhausted). Retry starts a new attempt of the same run."
          : "Stored runs across your jobs, newest first."}
      </p>
      <form class="filters" onSubmit={(event) => event.preventDefault()}>
        <fieldset class="statuses">
          <legend>Status {statuses.length ? null : <span class="muted">(any)</span>}</legend>
          {RUN_STATUSES.filter((status) => status !== "PLANNED" && status !== "ENQUEUED").map((status) => (
            <label key={status}>
              <input
                type="checkbox"
                name="status"
                value={status}
                checked={statuses.includes(status)}
                onChange={() => toggle(status)}
              />{" "}
              {status.toLowerCase()}
            </label>
          ))}
        </fieldset>
        <label>
          Job id{" "}
          <input
            name="job_id"
            value={jobId}
            placeholder="any job"
            onChange={(event) => filter({ job_id: event.currentTarget.value.trim() })}
          />
        </label>
        <label>
          Due in the last{" "}
          <select name="since" value={since} onChange={(event) => filter({ since: event.currentTarget.value })}>
            <option value="">any time</option>
            <option value="1h">hour</option>
            <option value="24h">day</option>
            <option value="7d">week</option>
          </select>
        </label>
      </form>
      {notice ? <Notice>{notice}</Notice> : null}
      <Problem error={first.error} />
      <table class="list" aria-label="runs">
        <thead>
          <tr>
            <th>Due</th>
            <th>Status</th>
            <th>Job</th>
            <th>Attempts</th>
            <th>Lag</th>
            <th>Last error</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {runs.map((run) => (
            <tr key={run.run_id} data-run-id={run.run_id}>
              <td title={run.scheduled_for}>
                <Link href={href("/runs", run.run_id)}>{when(run.scheduled_for)}</Link>
              </td>
              <td>
                <Status value={run.status} />
              </td>
              <td>
                <Link href={href("/jobs", run.job_id)} title={run.job_id}>
                  {names.data?.get(run.job_id) ?? <code>{run.job_id}</code>}
                </Link>
              </td>
              <td>{run.attempt}</td>
              <td>{milliseconds(run.lag_ms)}</td>
              <td class="error-text">{lastError(run)}</td>
              <td>
                {RETRYABLE.includes(run.status) ? (
                  <button type="button" onClick={() => setRetrying(run)}>
                    Retry
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {!first.loading && !runs.length ? <p class="empty">No runs match.</p> : null}
      {cursor ? (
        <button type="button" onClick={loadMore}>
          Load more
        </button>
      ) : null}
      {retrying ? (
        <Confirm
          title="Retry this run?"
          confirm="Retry"
          onClose={() => setRetrying(null)}
          onConfirm={async () => {
            const run = await api.retry(retrying.run_id);
            setNotice(
              <>
                Retrying <Link href={href("/runs", run.run_id)}>{run.run_id}</Link>: it is {run.status}.
              </>,
            );
            setMore(null);
            await first.reload();
          }}
        >
          <p>
            Run <code>{retrying.run_id}</code> ({retrying.status}, {retrying.attempt} attempts) gets a new attempt with the
            same idempotency key.
          </p>
        </Confirm>
      ) : null}
    </main>
  );
}
