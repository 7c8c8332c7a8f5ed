import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";

import {
  JOB_ID,
  type Job,
  type JobLabel,
  RETRYABLE,
  RUN_STATUSES,
  type Run,
  api,
  findJob,
  jobLabels,
} from "../api";
import { Confirm, Notice, Problem, Status, When } from "../components";
import { UTC, milliseconds } from "../format";
import { type Loaded, usePoll } from "../hooks";
import { Link, href, navigate, useLocation } from "../router";

const SINCE: Record<string, number> = { "": 0, "1h": 3600, "24h": 86400, "7d": 7 * 86400 };
const DEAD_LETTERS = ["FAILED", "DEAD"];

function lastError(run: Run): string {
  const failed = [...run.attempts].reverse().find((attempt) => attempt.error_code || attempt.error_message);
  if (!failed) return run.reason ?? "";
  return [failed.error_code, failed.error_message].filter(Boolean).join(": ");
}

/** Runs across the tenant. Without a choice of statuses it is the dead-letter view: FAILED and DEAD runs,
 * each with Retry (a new attempt of the same run, with the same idempotency key). The job filter takes a
 * job's name or its id; a name is looked up among the tenant's jobs and the runs asked for by the job's id. */
export function Runs() {
  const location = useLocation();
  // No status parameter: the dead-letter view; an empty one ("status="): every status.
  const chosen = location.query.getAll("status");
  const statuses = chosen.length ? chosen.filter(Boolean) : DEAD_LETTERS;
  // ?job= takes a name or an id; ?job_id= is how links named a job before.
  const jobText = (location.query.get("job") ?? location.query.get("job_id") ?? "").trim();
  const since = location.query.get("since") ?? "";
  const [retrying, setRetrying] = useState<Run | null>(null);
  const [notice, setNotice] = useState<ComponentChildren>(null);
  const [more, setMore] = useState<{ items: Run[]; cursor: string | null } | null>(null);
  // What is typed, kept across the list's refreshes until it is committed (Enter, or leaving the field).
  const [draft, setDraft] = useState(jobText);
  useEffect(() => setDraft(jobText), [jobText]);
  const found = usePoll(() => findJob(jobText), 0, [jobText]);
  const jobId = jobText ? (found.data?.job_id ?? null) : "";
  const keys = [statuses.join(","), jobText, jobId, since];

  const query = () => ({
    status: statuses,
    job_id: jobId || undefined,
    since: SINCE[since] ? new Date(Date.now() - SINCE[since] * 1000).toISOString() : undefined,
    limit: 50,
  });
  // Until the job named is found, no runs are asked for: never every job's runs in place of one job's.
  const first = usePoll(async () => (jobId === null ? null : api.runs(query())), 3000, keys);
  const cursor = more ? more.cursor : (first.data?.next_cursor ?? null);
  const loadMore = async () => {
    if (!cursor) return;
    const page = await api.runs({ ...query(), cursor });
    setMore({ items: [...(more?.items ?? []), ...page.items], cursor: page.next_cursor });
  };

  const filter = (next: { status?: string[]; job?: string; since?: string }) => {
    const parameters = new URLSearchParams();
    const wanted = next.status ?? statuses;
    for (const value of wanted.length ? wanted : [""]) parameters.append("status", value);
    const job = next.job ?? jobText;
    if (job) parameters.set("job", job);
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

  // The runs' jobs, for their names and the zone of their times.
  const ids = [...new Set(runs.map((run) => run.job_id))].sort().join(" ");
  const [labels, setLabels] = useState<Map<string, JobLabel>>(new Map());
  useEffect(() => {
    let current = true;
    void jobLabels(ids ? ids.split(" ") : []).then((answer) => {
      if (current) setLabels(answer);
    });
    return () => {
      current = false;
    };
  }, [ids]);

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
          Job{" "}
          <input
            name="job"
            type="search"
            class="wide"
            value={draft}
            placeholder="any job: a name or an id"
            spellcheck={false}
            autocomplete="off"
            onInput={(event) => setDraft(event.currentTarget.value)}
            onChange={(event) => filter({ job: event.currentTarget.value.trim() })}
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
      <JobFilter text={jobText} found={found} />
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
              <td data-label="Due" class="wide">
                <Link href={href("/runs", run.run_id)}>
                  <When value={run.scheduled_for} zone={labels.get(run.job_id)?.zone ?? UTC} />
                </Link>
              </td>
              <td data-label="Status">
                <Status value={run.status} />
              </td>
              <td data-label="Job" class="span">
                <Link href={href("/jobs", run.job_id)} title={run.job_id}>
                  {labels.get(run.job_id)?.name ?? <code>{run.job_id}</code>}
                </Link>
              </td>
              <td data-label="Attempts">{run.attempt}</td>
              <td data-label="Lag">{milliseconds(run.lag_ms)}</td>
              <td data-label="Last error" class="error-text span">
                {lastError(run)}
              </td>
              <td>
                {RETRYABLE.includes(run.status) && !run.run_id.includes("/") ? (
                  <button type="button" onClick={() => setRetrying(run)}>
                    Retry
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {first.data && !runs.length ? (
        <p class="empty">{cursor ? "None among the runs read so far: load more to read further." : "No runs match."}</p>
      ) : null}
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
            Run <code>{retrying.run_id}</code> ({retrying.status}, {retrying.attempt} attempts){" "}
            {retrying.workflow
              ? "runs again its failed and cancelled tasks, and every task after them; the tasks that succeeded keep their outcome."
              : "gets a new attempt with the same idempotency key."}
          </p>
        </Confirm>
      ) : null}
    </main>
  );
}

/** What the job filter found: the job whose runs these are, that it is being looked for, or that no job has
 * the name (or the id) given. */
function JobFilter({ text, found }: { text: string; found: Loaded<Job | null> }) {
  if (!text) return null;
  if (found.error) return <Problem error={found.error} />;
  if (found.loading) return <p class="muted">Looking for the job “{text}”…</p>;
  if (!found.data) {
    return (
      <p class="problem" role="alert" data-testid="job-filter">
        No job is named “{text}”{JOB_ID.test(text) ? " or has it as its id" : ""}: no runs to show.
      </p>
    );
  }
  const job = found.data;
  return (
    <p class="muted" data-testid="job-filter">
      Runs of job <Link href={href("/jobs", job.job_id)}>{job.name}</Link> (<code>{job.job_id}</code>
      {job.status === "CANCELLED" ? ", cancelled" : ""}).
    </p>
  );
}
