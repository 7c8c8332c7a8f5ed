// Times are shown in the browser's own time zone, with the API's RFC 3339 value on hover.

const dateTime = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "2-digit",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});
const timeOnly = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });

export function when(value: string | null | undefined): string {
  if (!value) return "—";
  const date = new Date(value);
  const today = new Date();
  return date.toDateString() === today.toDateString() ? timeOnly.format(date) : dateTime.format(date);
}

export function relative(value: string | null | undefined, now = Date.now()): string {
  if (!value) return "";
  const seconds = Math.round((new Date(value).getTime() - now) / 1000);
  const size = Math.abs(seconds);
  const text =
    size < 60
      ? `${size} s`
      : size < 3600
        ? `${Math.round(size / 60)} min`
        : size < 86400 * 2
          ? `${Math.round(size / 3600)} h`
          : `${Math.round(size / 86400)} d`;
  if (size < 1) return "now";
  return seconds > 0 ? `in ${text}` : `${text} ago`;
}

export function milliseconds(value: number | null | undefined): string {
  if (value === null || value === undefined) return "—";
  if (value < 1000) return `${value} ms`;
  if (value < 60_000) return `${(value / 1000).toFixed(value < 10_000 ? 2 : 1)} s`;
  return `${(value / 60_000).toFixed(1)} min`;
}

export function seconds(value: number): string {
  if (value % 86400 === 0) return `${value / 86400} d`;
  if (value % 3600 === 0) return `${value / 3600} h`;
  if (value % 60 === 0) return `${value / 60} min`;
  return `${value} s`;
}

/** A percentile of sorted values, interpolated as the API's stats compute it
 * (`statistics.quantiles(values, n=100, method="inclusive")`, rounded). */
export function percentile(sorted: number[], rank: number): number | null {
  if (!sorted.length) return null;
  const position = ((sorted.length - 1) * rank) / 100;
  const low = Math.floor(position);
  const high = Math.min(low + 1, sorted.length - 1);
  return Math.round(sorted[low] + (sorted[high] - sorted[low]) * (position - low));
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
