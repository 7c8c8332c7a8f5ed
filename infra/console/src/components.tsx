import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

import { ApiError, type Run } from "./api";
import { UTC, milliseconds, wallClock, when } from "./format";

export function Status({ value }: { value: string }) {
  return <span class={`status status-${value.toLowerCase()}`}>{value}</span>;
}

/** A time in `zone` with the zone named beside it ("03:00:00 Europe/Paris"), the API's value on hover. */
export function When({ value, zone = UTC }: { value: string | null | undefined; zone?: string }) {
  if (!value) return <>—</>;
  const text = when(value, zone);
  const cut = text.lastIndexOf(" ");
  return (
    <time dateTime={value} title={value}>
      {text.slice(0, cut)} <span class="zone">{text.slice(cut + 1)}</span>
    </time>
  );
}

export function Problem({ error }: { error: Error | null | undefined }) {
  if (!error) return null;
  const code = error instanceof ApiError ? `${error.code}: ` : "";
  return (
    <p class="problem" role="alert">
      {code}
      {error.message}
    </p>
  );
}

export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <p class="notice" role="status">
      {children}
    </p>
  );
}

interface ConfirmProps {
  title: string;
  confirm: string;
  danger?: boolean;
  onConfirm: () => Promise<void>;
  onClose: () => void;
  children?: ComponentChildren;
}

/** A modal <dialog> that stays open with the API's refusal when the action fails. */
export function Confirm({ title, confirm, danger, onConfirm, onClose, children }: ConfirmProps) {
  const dialog = useRef<HTMLDialogElement>(null);
  const gone = useRef(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error | null>(null);
  useEffect(() => {
    const element = dialog.current;
    if (element && !element.open) element.showModal();
    return () => {
      // Closing it fires "close" later, after a new dialog may have opened: that one must not hear it.
      gone.current = true;
      element?.close();
    };
  }, []);
  // Escape closes the dialog itself; the parent learns of it here.
  const closed = () => {
    if (!gone.current) onClose();
  };
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await onConfirm();
      onClose();
    } catch (caught) {
      setError(caught as Error);
      setBusy(false);
    }
  };
  return (
    <dialog ref={dialog} class="confirm" aria-label={title} onClose={closed}>
      <form method="dialog" onSubmit={submit}>
        <h2>{title}</h2>
        {children}
        <Problem error={error} />
        <div class="actions">
          <button type="button" onClick={onClose} disabled={busy}>
            Keep it
          </button>
          <button type="submit" class={danger ? "danger" : "primary"} disabled={busy}>
            {confirm}
          </button>
        </div>
      </form>
    </dialog>
  );
}

interface FieldProps {
  label: string;
  name: string;
  error?: string;
  hint?: ComponentChildren;
  children: ComponentChildren;
}

/** A labelled input with the API's message for its field underneath. */
export function Field({ label, name, error, hint, children }: FieldProps) {
  return (
    <div class={`field${error ? " invalid" : ""}`} data-field={name}>
      <label for={name}>{label}</label>
      {children}
      {hint && !error ? <small class="hint">{hint}</small> : null}
      {error ? (
        <small class="field-error" id={`${name}-error`} role="alert">
          {error}
        </small>
      ) : null}
    </div>
  );
}

export interface Series {
  label: string;
  stroke: string;
  unit?: string;
}

interface ChartProps {
  title: string;
  /** x (epoch seconds) first, then one array per series; null is a gap. */
  data: [number[], ...(number | null)[][]];
  series: Series[];
  height?: number;
  points?: boolean;
  /** A fixed time range for the x axis (epoch seconds), instead of the data's. */
  xRange?: [number, number];
  /** The time zone of the x axis and the cursor's time, named in the caption. */
  zone?: string;
}

// Whole seconds at least between the x axis's ticks, then minutes, hours and days.
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400, 604800];

/** The x axis's labels in `zone`: dates ("11-28") for steps of days, else times ("03:00", "03:00:30"). */
function timeLabels(ticks: number[], zone: string): string[] {
  const step = ticks.length > 1 ? ticks[1] - ticks[0] : 60;
  return ticks.map((tick) => {
    const { day, time } = wallClock(new Date(tick * 1000), zone);
    return step >= 86400 ? day.slice(5) : step % 60 === 0 ? time.slice(0, 5) : time;
  });
}

/** A time chart with uPlot: canvas, legend and cursor, sized to its container. */
export function Chart({ title, data, series, height = 220, points = true, xRange, zone = UTC }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = series.map((one) => one.label).join("|");

  useEffect(() => {
    const element = box.current;
    if (!element) return undefined;
    const options: uPlot.Options = {
      width: Math.max(element.clientWidth, 200),
      height,
      // Ticks fall on the zone's whole hours and days; the cursor's time is read in the zone too.
      tzDate: (seconds: number) => uPlot.tzDate(new Date(seconds * 1000), zone),
      series: [
        {
          label: "due",
          value: (_: uPlot, seconds: number | null) =>
            seconds === null ? "—" : when(new Date(seconds * 1000).toISOString(), zone),
        },
        ...series.map((one) => ({
          label: one.label,
          stroke: one.stroke,
          width: 2,
          spanGaps: false,
          points: { show: points, size: 6, fill: one.stroke },
          value: (_: uPlot, value: number | null) => (value === null ? "—" : milliseconds(value)),
        })),
      ],
      axes: [
        { space: 90, incrs: TIME_STEPS, values: (_: uPlot, ticks: number[]) => timeLabels(ticks, zone) },
        { values: (_: uPlot, ticks: number[]) => ticks.map((tick) => milliseconds(tick)), size: 70 },
      ],
      scales: {
        x: { time: true, ...(xRange ? { range: (): uPlot.Range.MinMax => [xRange[0], xRange[1]] } : {}) },
        y: { range: (_: uPlot, min: number, max: number) => [0, Math.max(max * 1.1, min + 1, 10)] },
      },
      legend: { live: true },
    };
    plot.current = new uPlot(options, data as uPlot.AlignedData, element);
    const resize = new ResizeObserver(() => {
      plot.current?.setSize({ width: Math.max(element.clientWidth, 200), height });
    });
    resize.observe(element);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [shape, height, points, xRange?.[0], xRange?.[1], zone]);

  useEffect(() => {
    plot.current?.setData(data as uPlot.AlignedData);
  }, [data]);

  return (
    <figure class="chart">
      <figcaption>
        {title} <span class="zone">(times in {zone})</span>
      </figcaption>
      <div ref={box} class="chart-canvas" role="img" aria-label={title} />
    </figure>
  );
}

const OUTCOME_CLASS: Record<string, string> = {
  succeeded: "ok",
  retryable_error: "retry",
  permanent_error: "fail",
  abandoned: "fail",
};

/** The width of an element in CSS pixels, followed as it changes. */
export function useWidth(element: { current: Element | null }, initial: number): number {
  const [width, setWidth] = useState(initial);
  useEffect(() => {
    const current = element.current;
    if (!current) return undefined;
    const measure = () => setWidth(Math.round(current.clientWidth) || initial);
    measure();
    const resize = new ResizeObserver(measure);
    resize.observe(current);
    return () => resize.disconnect();
  }, []);
  return width;
}

/** The run's attempts on one time axis, from the time it was due to the end of its last attempt, drawn at
 * the width it has (labels keep their size on a phone). */
export function Timeline({ run, now, zone = UTC }: { run: Run; now: number; zone?: string }) {
  const figure = useRef<HTMLElement>(null);
  const due = new Date(run.scheduled_for).getTime();
  const spans = run.attempts.map((attempt) => {
    const start = new Date(attempt.started_at).getTime();
    const end = attempt.finished_at ? new Date(attempt.finished_at).getTime() : now;
    return { attempt, start, end };
  });
  const first = Math.min(due, ...spans.map((span) => span.start));
  const last = Math.max(due + 1, ...spans.map((span) => span.end));
  const width = Math.max(useWidth(figure, 1000), 240);
  const scale = (time: number) => 20 + ((time - first) / (last - first)) * (width - 40);
  const rowHeight = 26;
  const height = 40 + spans.length * rowHeight;
  return (
    <figure class="timeline" ref={figure}>
      <figcaption>
        Attempts from <When value={new Date(first).toISOString()} zone={zone} /> over {milliseconds(last - first)}
      </figcaption>
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label="attempts on a timeline">
        <line class="axis" x1={20} x2={width - 20} y1={height - 16} y2={height - 16} />
        <line class="due" x1={scale(due)} x2={scale(due)} y1={4} y2={height - 12} />
        <text class="label" x={scale(due) + 4} y={height - 2}>
          due
        </text>
        <text class="label" x={width - 20} y={height - 2} text-anchor="end">
          +{milliseconds(last - first)}
        </text>
        {spans.map(({ attempt, start, end }, index) => {
          const x = scale(start);
          const y = 8 + index * rowHeight;
          const barWidth = Math.max(scale(end) - x, 3);
          const previous = index > 0 ? spans[index - 1] : null;
          const label = `#${attempt.attempt} ${attempt.outcome ?? "running"} · ${milliseconds(end - start)}`;
          // After the bar where the label fits (about 7 px a character at 12 px), else before it, else inside.
          const room = label.length * 7;
          const after = x + barWidth + 6 + room <= width - 4;
          const before = !after && x - 6 - room >= 4;
          return (
            <g key={attempt.attempt} class={`attempt ${OUTCOME_CLASS[attempt.outcome ?? ""] ?? "running"}`}>
              {previous ? (
                <line class="wait" x1={scale(previous.end)} x2={x} y1={y - rowHeight / 2 + 9} y2={y + 9} />
              ) : null}
              <rect x={x} y={y} width={barWidth} height={18} rx={3}>
                <title>
                  attempt {attempt.attempt}: {attempt.outcome ?? "running"}, {milliseconds(attempt.duration_ms)}
                </title>
              </rect>
              <text
                class={after || before ? "label" : "label inside"}
                x={after ? x + barWidth + 6 : before ? x - 6 : x + 6}
                y={y + 13}
                text-anchor={before ? "end" : "start"}
              >
                {label}
              </text>
            </g>
          );
        })}
      </svg>
    </figure>
  );
}
