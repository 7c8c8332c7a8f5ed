// A router on the History API: console paths are real paths (/jobs/<id>), which the server answers with
// index.html (the local gateway's fallback, a CloudFront Function on AWS), so a link can be shared or reloaded.
import type { AnchorHTMLAttributes, ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";

export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  return { path: window.location.pathname, query: new URLSearchParams(window.location.search) };
}

const listeners = new Set<() => void>();

export function navigate(to: string, { replace = false } = {}): void {
  if (replace) window.history.replaceState(null, "", to);
  else window.history.pushState(null, "", to);
  for (const listener of listeners) listener();
  if (!replace) window.scrollTo(0, 0);
}

export function useLocation(): Location {
  const [location, setLocation] = useState(current);
  useEffect(() => {
    const update = () => setLocation(current());
    listeners.add(update);
    window.addEventListener("popstate", update);
    return () => {
      listeners.delete(update);
      window.removeEventListener("popstate", update);
    };
  }, []);
  return location;
}

/** `pattern` such as "/jobs/:id": the decoded parameters when `path` matches, else null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split("/");
  const got = path.replace(/\/+$/, "").split("/");
  if (path === "/") got.splice(1);
  if (want.length !== got.length) return null;
  const parameters: Record<string, string> = {};
  for (let index = 0; index < want.length; index++) {
    if (want[index].startsWith(":")) {
      if (!got[index]) return null;
      parameters[want[index].slice(1)] = decodeURIComponent(got[index]);
    } else if (want[index] !== got[index]) return null;
  }
  return parameters;
}

export function href(...parts: string[]): string {
  return parts.map((part, index) => (index === 0 ? part : encodeURIComponent(part))).join("/");
}

type LinkProps = AnchorHTMLAttributes & { href: string; children?: ComponentChildren };

/** An <a> that navigates in place (a modified click still opens a new tab). */
export function Link({ href: to, children, ...rest }: LinkProps) {
  const onClick = (event: MouseEvent) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    event.preventDefault();
    navigate(to);
  };
  return (
    <a href={to} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}
