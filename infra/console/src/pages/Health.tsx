import { type Flow, type PoolStats, RUN_STATUSES, type Run, api } from "../api";
import { Chart, Problem, Status, When } from "../components";
import { milliseconds, percentile } from "../format";
import { usePoll } from "../hooks";
import { Link } from "../router";

const HISTORY_SECONDS = 3600;
const BUCKET_SECONDS = 60;
const MAX_PAGES = 5;

/** The runs due in the last hour (at most MAX_PAGES pages of 100), for the lag history. */
async function recentRuns(): Promise<{ runs: Run[]; complete: boolean; until: number }> {
  const until = Math.ceil(Date.now() / 60_000) * 60;
  const since = new Date((until - HISTORY_SECONDS) * 1000).toISOString();
  const runs: Run[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < MAX_PAGES; page++) {
    const answer = await api.runs({ since, limit: 100, cursor });
    runs.push(...answer.items);
    cursor = answer.next_cursor;
    if (!cursor) return { runs, complete: true, until };
  }
  return { runs, complete: false, until };
}

/** p50, p95 and p99 of the trigger lag of the runs due in each minute. */
export function lagByMinute(runs: Run[]): [number[], (number | null)[], (number | null)[], (number | null)[]] {
  const buckets = new Map<number, number[]>();
  for (const run of runs) {
    if (run.lag_ms === null) continue;
    const minute = Math.floor(new Date(run.scheduled_for).getTime() / 1000 / BUCKET_SECONDS) * BUCKET_SECONDS;
    const bucket = buckets.get(minute) ?? [];
    bucket.push(run.lag_ms);
    buckets.set(minute, bucket);
  }
  const minutes = [...buckets.keys()].sort((a, b) => a - b);
  const sorted = minutes.map((minute) => (buckets.get(minute) ?? []).sort((a, b) => a - b));
  return [
    minutes,
    sorted.map((values) => percentile(values, 50)),
    sorted.map((values) => percentile(values, 95)),
    sorted.map((values) => percentile(values, 99)),
  ];
}

function Counts({ title, counts, link }: { title: string; counts: Record<string, number>; link?: (key: string) => string }) {
  const shown = Object.entries(counts).filter(([, count]) => count > 0);
  return (
    <section class="card counts" aria-label={title}>
      <h2>{title}</h2>
      {shown.length ? (
        <ul>
          {shown.map(([key, count]) => (
            <li key={key} data-status={key}>
              {link ? (
                <Link href={link(key)}>
                  <Status value={key} />
                </Link>
              ) : (
                <Status value={key} />
              )}{" "}
              <strong>{count}</strong>
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted">None.</p>
      )}
    </section>
  );
}

/** Each pool's runs waiting for a claim by the tenant's workers, and how long the oldest has waited. */
function Pools({ pools }: { pools: PoolStats[] }) {
  if (!pools.length) return null;
  return (
    <section class="card" aria-label="pools">
      <h2>Pools: runs waiting for a worker</h2>
      <table class="list" aria-label="pools">
        <thead>
          <tr>
            <th>Pool</th>
            <th>Waiting</th>
            <th>Oldest wait</th>
            <th>Waiting since</th>
          </tr>
        </thead>
        <tbody>
          {pools.map((pool) => (
            <tr key={pool.pool} data-pool={pool.pool}>
              <td data-label="Pool">
                <code>{pool.pool}</code>
              </td>
              <td data-label="Waiting" data-field="waiting">
                {pool.waiting}
                {pool.waiting_capped ? "+" : ""}
              </td>
              <td data-label="Oldest wait" data-field="oldest-wait">
                {pool.oldest_wait_seconds === null ? "—" : milliseconds(Math.round(pool.oldest_wait_seconds * 1000))}
              </td>
              <td data-label="Waiting since" class="span">
                <When value={pool.oldest_waiting_since} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** Flow control: the tenant's limits with its running, waiting and throttled runs, and each concurrency key. */
function FlowControl({ flow }: { flow: Flow }) {
  const rate = flow.max_runs_per_second;
  const sampled = flow.running_from === "sampled_runs";
  return (
    <section class="card" aria-label="flow control">
      <h2>Flow control</h2>
      <div class="tiles" aria-label="flow counts">
        <div class="tile" data-metric="running">
          <span class="muted">running{sampled ? " (sampled)" : ""}</span>
          <strong>{flow.running}</strong>
        </div>
        <div class="tile" data-metric="waiting">
          <span class="muted">waiting for a slot</span>
          <strong>
            {flow.waiting}
            {flow.waiting_capped ? "+" : ""}
          </strong>
        </div>
        <div class="tile" data-metric="throttled">
          <span class="muted">throttled</span>
          <strong>{flow.throttled}</strong>
        </div>
      </div>
      <dl class="facts" aria-label="limits">
        <dt>Max concurrent runs</dt>
        <dd data-field="max_concurrent_runs">{flow.max_concurrent_runs ?? "none"}</dd>
        <dt>Throttle</dt>
        <dd data-field="throttle">{rate === null ? "none" : `${rate}/s, burst ${flow.burst ?? rate}`}</dd>
        {flow.disabled ? (
          <>
            <dt>State</dt>
            <dd data-field="disabled">disabled: its fires wait</dd>
          </>
        ) : null}
      </dl>
      {flow.keys.length ? (
        <table class="list" aria-label="concurrency keys">
          <thead>
            <tr>
              <th>Concurrency key</th>
              <th>Max</th>
              <th>Running</th>
              <th>Waiting</th>
            </tr>
          </thead>
          <tbody>
            {flow.keys.map((key) => (
              <tr key={key.key} data-key={key.key}>
                <td data-label="Concurrency key">
                  <code>{key.key}</code>
                </td>
                <td data-label="Max" data-field="max">
                  {key.max_concurrency}
                </td>
                <td data-label="Running" data-field="running">
                  {key.running}
                </td>
                <td data-label="Waiting" data-field="waiting">
                  {key.waiting}
                  {key.waiting_capped ? "+" : ""}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p class="muted">No job names a concurrency key.</p>
      )}
    </section>
  );
}

/** The tenant's health: GET /v1/stats every few seconds, and the lag percentiles minute by minute. */
export function Health() {
  const stats = usePoll(() => api.stats(), 5000, []);
  const history = usePoll(recentRuns, 60_000, []);
  const data = stats.data;
  const lags = data?.trigger_lag_ms ?? {};
  const window = data ? Math.round(data.window_seconds / 60) : 60;
  const runOrder = (counts: Record<string, number>) =>
    Object.fromEntries(RUN_STATUSES.filter((status) => status in counts).map((status) => [status, counts[status]]));
  return (
    <main>
      <header class="page-head">
        <h1>Health</h1>
      </header>
      <Problem error={stats.error} />
      {data ? (
        <>
          <div class="tiles" aria-label="trigger lag">
            {["p50", "p95", "p99"].map((key) => (
              <div class="tile" data-metric={key} key={key}>
                <span class="muted">lag {key}</span>
                <strong>{milliseconds(lags[key] ?? null)}</strong>
              </div>
            ))}
            <div class="tile" data-metric="queue_depth">
              <span class="muted">queue depth</span>
              <strong>{data.queue_depth}</strong>
            </div>
            <div class="tile" data-metric="sampled_runs">
              <span class="muted">runs sampled</span>
              <strong>{data.sampled_runs}</strong>
            </div>
          </div>
          <div class="two-columns">
            <Counts title="Jobs by status" counts={data.jobs} link={(status) => `/jobs?status=${status}`} />
            <Counts
              title={`Runs by status, last ${window} min`}
              counts={runOrder(data.runs)}
              link={(status) => `/runs?status=${status}&since=1h`}
            />
          </div>
          {data.flow ? <FlowControl flow={data.flow} /> : null}
          <Pools pools={data.pools ?? []} />
        </>
      ) : null}
      <section class="card" aria-label="lag history">
        <h2>Trigger lag over the last hour</h2>
        <Problem error={history.error} />
        {history.data ? (
          <>
            <Chart
              title="Lag percentiles of the runs due in each minute"
              data={lagByMinute(history.data.runs)}
              xRange={[history.data.until - HISTORY_SECONDS, history.data.until]}
              series={[
                { label: "p50", stroke: "#16a34a" },
                { label: "p95", stroke: "#d97706" },
                { label: "p99", stroke: "#dc2626" },
              ]}
            />
            <p class="muted">
              From {history.data.runs.length} runs{history.data.complete ? "" : " (the most recent ones)"}.
            </p>
          </>
        ) : null}
      </section>
    </main>
  );
}
