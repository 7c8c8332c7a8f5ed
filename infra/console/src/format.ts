// Times are shown in a time zone named beside them: the job's (its cron schedule's zone; UTC for a rate or a
// one-time schedule) where there is a job, else UTC. The API's RFC 3339 value shows on hover.

export const UTC = "UTC";

const formats = new Map<string, Intl.DateTimeFormat>();

/** A formatter of year to second in `zone` (UTC when the browser does not know the zone), and the zone used. */
function formatter(zone: string): [Intl.DateTimeFormat, string] {
  let found = formats.get(zone);
  if (!found) {
    try {
      found = new Intl.DateTimeFormat("en-GB", {
        timeZone: zone,
        year: "numeric",
        month: "2-digit",
        day: "2-digit",
        hour: "2-digit",
        minute: "2-digit",
        second: "2-digit",
        hourCycle: "h23",
      });
    } catch {
      return formatter(UTC); // a zone unknown to this browser (it knows UTC)
    }
    formats.set(zone, found);
  }
  return [found, zone];
}

/** The wall-clock date ("2026-11-28") and time ("03:00:00") of `date` in `zone`, and the zone used. */
export function wallClock(date: Date, zone: string): { day: string; time: string; zone: string } {
  const [format, used] = formatter(zone);
  const part: Record<string, string> = {};
  for (const { type, value } of format.formatToParts(date)) part[type] = value;
  const day = `${part.year}-${part.month}-${part.day}`;
  return { day, time: `${part.hour}:${part.minute}:${part.second}`, zone: used };
}

/** The zone a job's times are shown in: its cron schedule's, else UTC (as the API reads its other schedules). */
export function jobZone(job: { schedule: { type: string; timezone?: string } } | null | undefined): string {
  return (job?.schedule.type === "cron" && job.schedule.timezone) || UTC;
}

/** "2026-11-28 03:00:00 Europe/Paris"; the date left out when it is today in that zone ("03:00:00 UTC"). */
export function when(value: string | null | undefined, zone: string = UTC): string {
  if (!value) return "—";
  const shown = wallClock(new Date(value), zone);
  const today = wallClock(new Date(), zone).day;
  return `${shown.day === today ? "" : `${shown.day} `}${shown.time} ${shown.zone}`;
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
