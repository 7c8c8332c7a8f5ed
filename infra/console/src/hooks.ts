import { useCallback, useEffect, useRef, useState } from "preact/hooks";

export interface Loaded<T> {
  data: T | null;
  error: Error | null;
  loading: boolean;
  reload: () => Promise<void>;
}

/** Loads with `load` now and again every `everyMs` while the tab is visible (0: once); again when `keys`
 * change. A later answer never gives way to an earlier one. */
export function usePoll<T>(load: () => Promise<T>, everyMs: number, keys: unknown[]): Loaded<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const [loading, setLoading] = useState(true);
  const latest = useRef(0);
  const loader = useRef(load);
  loader.current = load;

  const reload = useCallback(async () => {
    const mine = ++latest.current;
    try {
      const value = await loader.current();
      if (mine !== latest.current) return;
      setData(value);
      setError(null);
    } catch (caught) {
      if (mine !== latest.current) return;
      setError(caught as Error);
    } finally {
      if (mine === latest.current) setLoading(false);
    }
  }, []);

  useEffect(() => {
    setLoading(true);
    setData(null);
    void reload();
    if (!everyMs) return undefined;
    const timer = window.setInterval(() => {
      if (document.visibilityState === "visible") void reload();
    }, everyMs);
    return () => {
      window.clearInterval(timer);
      latest.current++;
    };
  }, keys);

  return { data, error, loading, reload };
}

/** `value`, once it has not changed for `ms`. */
export function useDebounced<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = window.setTimeout(() => setSettled(value), ms);
    return () => window.clearTimeout(timer);
  }, [value, ms]);
  return settled;
}

/** Re-renders every `ms`, for relative times ("in 3 s"). */
export function useNow(ms: number): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = window.setInterval(() => setNow(Date.now()), ms);
    return () => window.clearInterval(timer);
  }, [ms]);
  return now;
}
