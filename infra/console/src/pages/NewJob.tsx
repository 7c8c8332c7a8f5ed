import { useEffect, useMemo, useRef, useState } from "preact/hooks";

import { ApiError, type Preview, api, newKey } from "../api";
import { Field, Problem, When } from "../components";
import { jobZone, relative } from "../format";
import { useDebounced } from "../hooks";
import { Link, href, navigate } from "../router";

type Kind = "cron" | "rate" | "once";

const UNITS: Record<string, number> = { seconds: 1, minutes: 60, hours: 3600, days: 86400 };
const BROWSER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
const ZONES: string[] = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];

// The form's inputs, by the API fields whose errors they show (the longest prefix of the error's field wins).
const FIELD_INPUTS: [string, string][] = [
  ["name", "name"],
  ["schedule.expression", "expression"],
  ["schedule.timezone", "timezone"],
  ["schedule.every_seconds", "every"],
  ["schedule.at", "at"],
  ["schedule", "kind"],
  ["target", "url"],
  ["payload", "payload"],
  ["retry", "max_attempts"],
  ["priority", "priority"],
];

function inputFor(field: string | null): string {
  if (!field) return "";
  const found = FIELD_INPUTS.filter(([prefix]) => field === prefix || field.startsWith(`${prefix}.`)).sort(
    (a, b) => b[0].length - a[0].length,
  )[0];
  return found ? found[1] : "";
}

/** Each message of an API refusal under the input it names; "" holds those that name none. */
export function errorsByInput(error: ApiError): Record<string, string> {
  const found: Record<string, string> = {};
  for (const [field, message] of Object.entries(error.byField())) {
    const input = inputFor(field || null);
    found[input] = found[input] ? `${found[input]}; ${message}` : message;
  }
  return found;
}

function localInput(date: Date): string {
  const shifted = new Date(date.getTime() - date.getTimezoneOffset() * 60_000);
  return shifted.toISOString().slice(0, 16);
}

interface Form {
  name: string;
  kind: Kind;
  expression: string;
  timezone: string;
  every: string;
  unit: string;
  at: string;
  url: string;
  payload: string;
  max_attempts: string;
  priority: string;
}

function schedule(form: Form): unknown {
  if (form.kind === "cron") return { type: "cron", expression: form.expression.trim(), timezone: form.timezone.trim() };
  if (form.kind === "rate") {
    const every = Number(form.every);
    return { type: "rate", every_seconds: Number.isFinite(every) ? Math.round(every * UNITS[form.unit]) : form.every };
  }
  const at = form.at ? new Date(form.at) : null;
  return { type: "once", at: at && !Number.isNaN(at.getTime()) ? at.toISOString() : form.at };
}

/** Create a job: the schedule in words and its next fires come from POST /v1/schedule-preview as you type,
 * and the API's refusals show under the inputs they name. */
export function NewJob() {
  const [form, setForm] = useState<Form>({
    name: "",
    kind: "cron",
    expression: "*/5 * * * *",
    timezone: BROWSER_ZONE,
    every: "60",
    unit: "seconds",
    at: localInput(new Date(Date.now() + 5 * 60_000)),
    url: "",
    payload: "",
    max_attempts: "5",
    priority: "normal",
  });
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [failure, setFailure] = useState<Error | null>(null);
  const [busy, setBusy] = useState(false);
  const [preview, setPreview] = useState<Preview | null>(null);
  const [previewErrors, setPreviewErrors] = useState<Record<string, string>>({});
  const sent = useRef<{ body: string; key: string } | null>(null);

  const set = (name: keyof Form) => (event: Event) => {
    const value = (event.currentTarget as HTMLInputElement).value;
    setForm((old) => ({ ...old, [name]: value }));
    setErrors((old) => ({ ...old, [name]: "" }));
  };

  const wanted = useMemo(() => JSON.stringify(schedule(form)), [form]);
  const settled = useDebounced(wanted, 250);
  useEffect(() => {
    let current = true;
    api
      .preview(JSON.parse(settled), 5)
      .then((answer) => {
        if (!current) return;
        setPreview(answer);
        setPreviewErrors({});
      })
      .catch((caught: Error) => {
        if (!current) return;
        setPreview(null);
        setPreviewErrors(caught instanceof ApiError ? errorsByInput(caught) : { kind: caught.message });
      });
    return () => {
      current = false;
    };
  }, [settled]);

  const submit = async (event: Event) => {
    event.preventDefault();
    setFailure(null);
    let payload: unknown = null;
    if (form.payload.trim()) {
      try {
        payload = JSON.parse(form.payload);
      } catch (caught) {
        setErrors({ payload: `not JSON: ${(caught as Error).message}` });
        return;
      }
    }
    const spec = {
      name: form.name.trim(),
      schedule: schedule(form),
      target: { type: "http", url: form.url.trim() },
      payload,
      retry: { max_attempts: Number(form.max_attempts) || form.max_attempts },
      priority: form.priority,
    };
    const body = JSON.stringify(spec);
    // The same request sent twice (a double click, a retry after a lost answer) keeps its Idempotency-Key.
    if (!sent.current || sent.current.body !== body) sent.current = { body, key: newKey() };
    setBusy(true);
    try {
      const job = await api.createJob(spec, sent.current.key);
      navigate(href("/jobs", job.job_id));
    } catch (caught) {
      if (caught instanceof ApiError) {
        const found = errorsByInput(caught);
        setErrors(found);
        if (found[""]) setFailure(new Error(found[""]));
      } else setFailure(caught as Error);
    } finally {
      setBusy(false);
    }
  };

  const error = (name: string) => errors[name] || previewErrors[name] || undefined;
  // The fires in the zone the job will have: the cron schedule's, else UTC.
  const zone = jobZone({ schedule: JSON.parse(settled) as { type: string; timezone?: string } });

  return (
    <main>
      <header class="page-head">
        <h1>New job</h1>
        <Link href="/jobs">Back to jobs</Link>
      </header>
      <div class="two-columns">
        <form class="card job-form" onSubmit={submit} novalidate>
          <Field label="Name" name="name" error={error("name")} hint="Letters, digits, dot, dash and underscore.">
            <input id="name" name="name" value={form.name} onInput={set("name")} autocomplete="off" required />
          </Field>
          <Field label="Schedule" name="kind" error={error("kind")}>
            <select id="kind" name="kind" value={form.kind} onChange={set("kind")}>
              <option value="cron">cron expression</option>
              <option value="rate">every (rate)</option>
              <option value="once">once, at a time</option>
            </select>
          </Field>
          {form.kind === "cron" ? (
            <>
              <Field
                label="Cron expression"
                name="expression"
                error={error("expression")}
                hint="5 fields, or 6 with seconds first; L, W, # and @daily work."
              >
                <input
                  id="expression"
                  name="expression"
                  value={form.expression}
                  onInput={set("expression")}
                  spellcheck={false}
                  autocomplete="off"
                />
              </Field>
              <Field label="Time zone" name="timezone" error={error("timezone")}>
                <input
                  id="timezone"
                  name="timezone"
                  list="zones"
                  value={form.timezone}
                  onInput={set("timezone")}
                  autocomplete="off"
                />
                <datalist id="zones">
                  {ZONES.map((zone) => (
                    <option value={zone} />
                  ))}
                </datalist>
              </Field>
            </>
          ) : null}
          {form.kind === "rate" ? (
            <Field label="Every" name="every" error={error("every")}>
              <span class="inline">
                <input id="every" name="every" type="number" min="1" value={form.every} onInput={set("every")} />
                <select name="unit" value={form.unit} onChange={set("unit")} aria-label="unit">
                  {Object.keys(UNITS).map((unit) => (
                    <option value={unit}>{unit}</option>
                  ))}
                </select>
              </span>
            </Field>
          ) : null}
          {form.kind === "once" ? (
            <Field label={`At (your time, ${BROWSER_ZONE})`} name="at" error={error("at")}>
              <input id="at" name="at" type="datetime-local" step="1" value={form.at} onInput={set("at")} />
            </Field>
          ) : null}
          <Field label="Webhook URL" name="url" error={error("url")} hint="tickwork POSTs each run's envelope here.">
            <input
              id="url"
              name="url"
              type="url"
              placeholder="https://example.com/hook"
              value={form.url}
              onInput={set("url")}
              autocomplete="off"
            />
          </Field>
          <Field label="Payload (JSON, optional)" name="payload" error={error("payload")}>
            <textarea id="payload" name="payload" rows={4} spellcheck={false} value={form.payload} onInput={set("payload")} />
          </Field>
          <Field label="Attempts before the run is dead" name="max_attempts" error={error("max_attempts")}>
            <input
              id="max_attempts"
              name="max_attempts"
              type="number"
              min="1"
              max="100"
              value={form.max_attempts}
              onInput={set("max_attempts")}
            />
          </Field>
          <Field
            label="Priority"
            name="priority"
            error={error("priority")}
            hint="Under a backlog, higher priorities start first; none waits over 300 s longer than without."
          >
            <select id="priority" name="priority" value={form.priority} onChange={set("priority")}>
              <option value="high">high</option>
              <option value="normal">normal</option>
              <option value="low">low</option>
            </select>
          </Field>
          <Problem error={failure} />
          <div class="actions">
            <button type="submit" class="primary" disabled={busy}>
              Create job
            </button>
          </div>
        </form>
        <section class="card preview" aria-label="schedule preview">
          <h2>Schedule</h2>
          {preview ? (
            <>
              <p class="description">{preview.description}</p>
              <h3>Next fires</h3>
              {preview.fires.length ? (
                <ol class="fires">
                  {preview.fires.map((fire) => (
                    <li class={fire.excluded ? "excluded" : ""}>
                      <When value={fire.at} zone={zone} /> <span class="muted">({relative(fire.at)})</span>
                      {fire.dst ? <span class="tag">DST {fire.dst}</span> : null}
                      {fire.excluded ? <span class="tag">excluded: {fire.excluded}</span> : null}
                    </li>
                  ))}
                </ol>
              ) : (
                <p class="muted">No fire after now.</p>
              )}
            </>
          ) : (
            <p class="muted">{Object.keys(previewErrors).length ? "The schedule is not valid yet." : "…"}</p>
          )}
        </section>
      </div>
    </main>
  );
}
