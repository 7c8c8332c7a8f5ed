import { useEffect, useState } from "preact/hooks";

import { JOB_STATUSES, type Job, api } from "../api";
import { Problem, Status, When } from "../components";
import { jobZone, relative } from "../format";
import { usePoll, useNow } from "../hooks";
import { Link, href, navigate, useLocation } from "../router";

const PAGE = 100;

/** The tenant's jobs, newest first: filtered by status (by the API) and by name (here, over what is loaded). */
export function Jobs() {
  const location = useLocation();
  const status = location.query.get("status") ?? "";
  const [text, setText] = useState(location.query.get("q") ?? "");
  // Pages after the first, loaded on demand; the first page alone is refreshed every few seconds.
  const [more, setMore] = useState<{ items: Job[]; cursor: string | null } | null>(null);
  const now = useNow(1000);

  const first = usePoll(() => api.jobs({ status: status || undefined, limit: PAGE }), 5000, [status]);
  useEffect(() => setMore(null), [status]);
  const cursor = more ? more.cursor : (first.data?.next_cursor ?? null);

  const loadMore = async () => {
    if (!cursor) return;
    const page = await api.jobs({ status: status || undefined, limit: PAGE, cursor });
    setMore({ items: [...(more?.items ?? []), ...page.items], cursor: page.next_cursor });
  };

  const setFilter = (next: { status?: string; q?: string }) => {
    const query = new URLSearchParams(location.query);
    for (const [name, value] of Object.entries(next)) {
      if (value) query.set(name, value);
      else query.delete(name);
    }
    const search = query.toString();
    navigate(`/jobs${search ? `?${search}` : ""}`, { replace: true });
  };

  const needle = text.trim().toLowerCase();
  const seen = new Set<string>();
  const jobs = [...(first.data?.items ?? []), ...(more?.items ?? [])].filter(
    (job) =>
      !seen.has(job.job_id) &&
      seen.add(job.job_id) &&
      (!needle ||
      job.name.toLowerCase().includes(needle) ||
      job.job_id.toLowerCase().includes(needle) ||
        (job.target.url ?? "").toLowerCase().includes(needle)),
  );

  // The list answers last_run only where it has it at hand; a job's own page always has it.
  const lastRuns = jobs.some((job) => job.last_run);

  return (
    <main>
      <header class="page-head">
        <h1>Jobs</h1>
        <Link href="/jobs/new" class="button primary">
          New job
        </Link>
      </header>
      <form class="filters" onSubmit={(event) => event.preventDefault()}>
        <label>
          Status{" "}
          <select
            name="status"
            value={status}
            onChange={(event) => setFilter({ status: event.currentTarget.value })}
          >
            <option value="">any</option>
            {JOB_STATUSES.map((value) => (
              <option value={value}>{value.toLowerCase()}</option>
            ))}
          </select>
        </label>
        <label>
          Name{" "}
          <input
            name="q"
            type="search"
            class="wide"
            placeholder="filter by name, id or URL"
            value={text}
            onInput={(event) => {
              setText(event.currentTarget.value);
              setFilter({ q: event.currentTarget.value });
            }}
          />
        </label>
      </form>
      <Problem error={first.error} />
      <table class="list" aria-label="jobs">
        <thead>
          <tr>
            <th>Name</th>
            <th>Status</th>
            <th>Schedule</th>
            <th>Next fire</th>
            {lastRuns ? <th>Last run</th> : null}
          </tr>
        </thead>
        <tbody>
          {jobs.map((job) => (
            <tr key={job.job_id} data-job-id={job.job_id}>
              <td data-label="Name" class="span title">
                <Link href={href("/jobs", job.job_id)}>{job.name}</Link>
              </td>
              <td data-label="Status">
                <Status value={job.status} />
              </td>
              <td data-label="Schedule" class="wide">{job.schedule_description}</td>
              <td data-label="Next fire" class="wide">
                {job.next_fire_at ? (
                  <>
                    <When value={job.next_fire_at} zone={jobZone(job)} /> ({relative(job.next_fire_at, now)})
                  </>
                ) : (
                  "—"
                )}
              </td>
              {lastRuns ? (
                <td data-label="Last run" class="wide">
                  {job.last_run ? (
                    <Link href={href("/runs", job.last_run.run_id)}>
                      <Status value={job.last_run.status} />{" "}
                      <When value={job.last_run.scheduled_for} zone={jobZone(job)} />
                    </Link>
                  ) : (
                    "—"
                  )}
                </td>
              ) : null}
            </tr>
          ))}
        </tbody>
      </table>
      {!first.loading && !jobs.length ? <p class="empty">No jobs{status || needle ? " match" : " yet"}.</p> : null}
      {cursor ? (
        <button type="button" onClick={loadMore}>
          Load more
        </button>
      ) : null}
    </main>
  );
}
