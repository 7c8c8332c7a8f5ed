// The tickwork HTTP API (docs/openapi.json), called from the console's own origin: `tickwork local` serves
// both, and on AWS CloudFront sends /v1/* to API Gateway. The tenant token lives in sessionStorage only: it
// goes when the tab closes, and no other tab or later visit sees it.

import { jobZone } from "./format";

const TOKEN_KEY = "tickwork.token";

export type JobStatus = "ACTIVE" | "PAUSED" | "COMPLETED" | "CANCELLED";
export type RunStatus =
  | "PLANNED"
  | "ENQUEUED"
  | "RUNNING"
  | "RETRY_WAIT"
  | "SUCCEEDED"
  | "FAILED"
  | "DEAD"
  | "ABANDONED"
  | "MISSED"
  | "SKIPPED"
  | "CANCELLED";

export const JOB_STATUSES: JobStatus[] = ["ACTIVE", "PAUSED", "COMPLETED", "CANCELLED"];
export const RUN_STATUSES: RunStatus[] = [
  "PLANNED",
  "ENQUEUED",
  "RUNNING",
  "RETRY_WAIT",
  "SUCCEEDED",
  "FAILED",
  "DEAD",
  "ABANDONED",
  "MISSED",
  "SKIPPED",
  "CANCELLED",
];
/** The statuses a run can be retried from (POST /v1/runs/{id}/retry), and the dead-letter view's. */
export const RETRYABLE: RunStatus[] = ["FAILED", "DEAD", "ABANDONED"];
/** Statuses after which a run no longer changes by itself. */
export const FINAL: RunStatus[] = ["SUCCEEDED", "FAILED", "DEAD", "ABANDONED", "MISSED", "SKIPPED", "CANCELLED"];

export type Schedule =
  | { type: "once"; at: string }
  | { type: "cron"; expression: string; timezone?: string; [more: string]: unknown }
  | { type: "rate"; every_seconds: number; [more: string]: unknown };

export interface Target {
  type: string;
  url?: string;
  [more: string]: unknown;
}

/** One task of a workflow target: its own target, run once the tasks it depends on allow it. */
export interface WorkflowTask {
  id: string;
  target: Target;
  payload: unknown;
  retry: { max_attempts: number; [more: string]: unknown } | null;
  depends_on: string[];
  trigger_rule: "all_success" | "all_done" | "one_success" | "one_failed";
}

export interface WorkflowTarget extends Target {
  type: "workflow";
  tasks: WorkflowTask[];
  max_parallel: number | null;
  failure_mode: "fail_fast" | "continue";
}

export function isWorkflow(target: Target): target is WorkflowTarget {
  return target.type === "workflow" && Array.isArray(target.tasks);
}

export interface RunSummary {
  run_id: string;
  scheduled_for: string;
  status: RunStatus;
  attempt: number;
  finished_at: string | null;
}

export interface Job {
  job_id: string;
  name: string;
  status: JobStatus;
  schedule: Schedule;
  schedule_description: string;
  target: Target;
  payload: unknown;
  retry: { max_attempts: number; initial_delay_seconds: number; [more: string]: unknown };
  misfire_policy: string;
  overlap_policy: string;
  jitter_seconds: number;
  priority: "high" | "normal" | "low";
  description: string | null;
  created_at: string;
  next_fire_at: string | null;
  pause: { paused_at: string; paused_by: string; reason: string | null } | null;
  cancelled_at: string | null;
  last_run: RunSummary | null;
}

export interface Attempt {
  attempt: number;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  outcome: "succeeded" | "retryable_error" | "permanent_error" | "abandoned" | null;
  error_code: string | null;
  error_message: string | null;
  worker_id: string | null;
}

/** A workflow run's task that has a run (a task not started yet has none, and is not listed). */
export interface TaskRun {
  task_id: string;
  run_id: string;
  status: RunStatus;
  attempt: number;
  started_at: string | null;
  finished_at: string | null;
  error_code: string | null;
}

export interface Run {
  run_id: string;
  job_id: string;
  scheduled_for: string;
  status: RunStatus;
  trigger: "schedule" | "manual";
  attempt: number;
  created_at: string;
  enqueued_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  lag_ms: number | null;
  reason: string | null;
  retry_at: string | null;
  manual_retries: number;
  attempts: Attempt[];
  // A pool run's (its target is a pool): its worker reports progress, stage and a checkpoint through
  // heartbeats; the lease says who holds it and until when. The checkpoint comes with one run only.
  pool?: string | null;
  progress?: number | null;
  stage?: string | null;
  checkpoint?: unknown;
  lease_owner?: string | null;
  lease_expires_at?: string | null;
  lease_deadline?: string | null;
  heartbeat_at?: string | null;
  cancel_requested?: boolean;
  // A workflow run's: RUNNING while its tasks run; GET /v1/runs/{run_id} lists the tasks that have a run.
  workflow?: boolean;
  tasks?: TaskRun[] | null;
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export interface Preview {
  fire_times: string[];
  fires: { at: string; excluded: string | null; dst: string | null; starts_by: string | null }[];
  description: string;
}

export interface PoolStats {
  pool: string;
  waiting: number;
  waiting_capped: boolean;
  oldest_waiting_since: string | null;
  oldest_wait_seconds: number | null;
}

export interface KeyFlow {
  key: string;
  max_concurrency: number;
  running: number;
  waiting: number;
  waiting_capped: boolean;
}

/** The tenant's flow control: its limits, and the runs they hold (running, waiting, throttled). */
export interface Flow {
  max_concurrent_runs: number | null;
  max_runs_per_second: number | null;
  burst: number | null;
  disabled: boolean;
  running: number;
  running_from: "in_flight_slots" | "sampled_runs";
  waiting: number;
  waiting_capped: boolean;
  throttled: number;
  keys: KeyFlow[];
}

export interface Stats {
  pools?: PoolStats[];
  flow?: Flow | null;
  jobs: Record<string, number>;
  runs: Record<string, number>;
  trigger_lag_ms: Record<string, number | null>;
  queue_depth: number;
  window_seconds: number;
  sampled_runs: number;
}

export interface ErrorDetail {
  code: string;
  message: string;
  field: string | null;
}

/** An answer in the API's error shape: {"error": {"code", "message", "field", "details"}}. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field: string | null;
  readonly details: ErrorDetail[];

  constructor(status: number, detail: ErrorDetail, details: ErrorDetail[] = []) {
    super(detail.message);
    this.status = status;
    this.code = detail.code;
    this.field = detail.field;
    this.details = details.length ? details : [detail];
  }

  /** Each message by the field it names ("" for those that name none). */
  byField(): Record<string, string> {
    const found: Record<string, string> = {};
    for (const detail of this.details) {
      const key = detail.field ?? "";
      found[key] = found[key] ? `${found[key]}; ${detail.message}` : detail.message;
    }
    return found;
  }
}

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function signIn(value: string): void {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function signOut(): void {
  sessionStorage.removeItem(TOKEN_KEY);
}

let onUnauthorized: () => void = () => undefined;

/** What to do when the API refuses the token (it was revoked, or the stack restarted with others). */
export function whenUnauthorized(handler: () => void): void {
  onUnauthorized = handler;
}

type Query = Record<string, string | number | string[] | null | undefined>;

function queryString(query: Query | undefined): string {
  const parameters = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value === null || value === undefined || value === "") continue;
    for (const one of Array.isArray(value) ? value : [value]) parameters.append(name, String(one));
  }
  const text = parameters.toString();
  return text ? `?${text}` : "";
}

interface Call {
  query?: Query;
  body?: unknown;
  headers?: Record<string, string>;
  /** A token to try instead of the stored one (signing in). */
  bearer?: string;
}

const RATE_LIMIT_RETRIES = 3;

export async function call<T>(method: string, path: string, options: Call = {}): Promise<T> {
  const bearer = options.bearer ?? token();
  const headers: Record<string, string> = { Accept: "application/json", ...options.headers };
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(`${path}${queryString(options.query)}`, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      credentials: "omit",
      cache: "no-store",
    });
    if (response.status === 429 && attempt < RATE_LIMIT_RETRIES) {
      const wait = Number(response.headers.get("Retry-After") ?? "1");
      await new Promise((resolve) => setTimeout(resolve, Math.min(Math.max(wait, 0.2), 5) * 1000));
      continue;
    }
    const text = await response.text();
    const answer: unknown = text ? parse(text) : null;
    if (response.ok) return answer as T;
    const error = (answer as { error?: ErrorDetail & { details?: ErrorDetail[] } } | null)?.error;
    const refused = new ApiError(
      response.status,
      error ?? { code: `http_${response.status}`, message: `${response.status} ${response.statusText}`, field: null },
      error?.details ?? [],
    );
    if (response.status === 401 && options.bearer === undefined) onUnauthorized();
    throw refused;
  }
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { error: { code: "not_json", message: text.slice(0, 200), field: null } };
  }
}

const path = (id: string) => encodeURIComponent(id);

export const api = {
  jobs: (query: { status?: string; limit?: number; cursor?: string | null }) =>
    call<Page<Job>>("GET", "/v1/jobs", { query }),
  job: (id: string) => call<Job>("GET", `/v1/jobs/${path(id)}`),
  createJob: (spec: unknown, idempotencyKey: string) =>
    call<Job>("POST", "/v1/jobs", { body: spec, headers: { "Idempotency-Key": idempotencyKey } }),
  pause: (id: string, reason: string | null) =>
    call<Job>("POST", `/v1/jobs/${path(id)}/pause`, { body: { reason } }),
  resume: (id: string) => call<Job>("POST", `/v1/jobs/${path(id)}/resume`),
  cancel: (id: string) => call<Job>("DELETE", `/v1/jobs/${path(id)}`),
  trigger: (id: string, idempotencyKey: string) =>
    call<Run>("POST", `/v1/jobs/${path(id)}/trigger`, { headers: { "Idempotency-Key": idempotencyKey } }),
  jobRuns: (id: string, query: { limit?: number; cursor?: string | null }) =>
    call<Page<Run>>("GET", `/v1/jobs/${path(id)}/runs`, { query }),
  runs: (query: { status?: string[]; job_id?: string; since?: string; limit?: number; cursor?: string | null }) =>
    call<Page<Run>>("GET", "/v1/runs", { query }),
  run: (id: string) => call<Run>("GET", `/v1/runs/${path(id)}`),
  retry: (id: string) => call<Run>("POST", `/v1/runs/${path(id)}/retry`),
  cancelRun: (id: string) => call<Run>("POST", `/v1/runs/${path(id)}/cancel`),
  preview: (schedule: unknown, count: number, jitterSeconds = 0) =>
    call<Preview>("POST", "/v1/schedule-preview", {
      body: { schedule, count, jitter_seconds: jitterSeconds },
    }),
  stats: () => call<Stats>("GET", "/v1/stats"),
};

/** What the console shows of a job beside its runs: its name and the time zone its times are shown in. */
export interface JobLabel {
  name: string;
  zone: string;
}

function label(job: Job): JobLabel {
  return { name: job.name, zone: jobZone(job) };
}

const LABELS_KEPT_MS = 30_000;
let newest: { at: number; found: Promise<void> } | null = null;
const labels = new Map<string, { at: number; label: JobLabel | null }>();

/** The names and zones of the jobs `ids` name, kept 30 s: runs name their job by id only. The newest 100
 * jobs come in one call; any other job is read by its id (GET /v1/jobs/{id}). A job that cannot be read is
 * left out (its runs show its id, and their times in UTC). */
export async function jobLabels(ids: Iterable<string>): Promise<Map<string, JobLabel>> {
  const now = Date.now();
  if (!newest || now - newest.at > LABELS_KEPT_MS) {
    const found = api
      .jobs({ limit: 100 })
      .then((page) => {
        for (const job of page.items) labels.set(job.job_id, { at: Date.now(), label: label(job) });
      })
      .catch(() => undefined);
    newest = { at: now, found };
  }
  await newest.found;
  const wanted = [...new Set(ids)];
  await Promise.all(
    wanted
      .filter((id) => {
        const known = labels.get(id);
        return !known || now - known.at > LABELS_KEPT_MS;
      })
      .map((id) =>
        api.job(id).then(
          (job) => labels.set(id, { at: Date.now(), label: label(job) }),
          () => labels.set(id, { at: Date.now(), label: null }),
        ),
      ),
  );
  const found = new Map<string, JobLabel>();
  for (const id of wanted) {
    const known = labels.get(id)?.label;
    if (known) found.set(id, known);
  }
  return found;
}

/** A job id: a ULID. */
export const JOB_ID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** The job a filter names, by its id or by its name, or null when no job has it.
 *
 * An id (a ULID) is read with GET /v1/jobs/{id}. A name is looked for in the tenant's jobs, newest first, 100
 * a page: those not cancelled first (GET /v1/jobs lists them, and a name is one of theirs at most), then the
 * cancelled ones (a cancelled job gives its name up; the newest that had it is taken). */
export async function findJob(text: string): Promise<Job | null> {
  const wanted = text.trim();
  if (!wanted) return null;
  if (JOB_ID.test(wanted)) {
    try {
      return await api.job(wanted);
    } catch (caught) {
      // A name can look like an id: then it is looked for as a name.
      if (!(caught instanceof ApiError && caught.status === 404)) throw caught;
    }
  }
  for (const status of [undefined, "CANCELLED"]) {
    let cursor: string | null = null;
    do {
      const page: Page<Job> = await api.jobs({ status, limit: 100, cursor });
      const found = page.items.find((job) => job.name === wanted);
      if (found) return found;
      cursor = page.next_cursor;
    } while (cursor);
  }
  return null;
}

/** A random Idempotency-Key (crypto.randomUUID needs a secure context; a console on a LAN address has none). */
export function newKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
