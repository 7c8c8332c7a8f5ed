import { render } from "preact";
import { useEffect } from "preact/hooks";

import { signOut, token, whenUnauthorized } from "./api";
import { Health } from "./pages/Health";
import { Job } from "./pages/Job";
import { Jobs } from "./pages/Jobs";
import { NewJob } from "./pages/NewJob";
import { Run } from "./pages/Run";
import { Runs } from "./pages/Runs";
import { SignIn } from "./pages/SignIn";
import { Link, match, navigate, useLocation } from "./router";
import "./style.css";

function toSignIn(): void {
  const here = window.location.pathname + window.location.search;
  navigate(here.startsWith("/sign-in") ? "/sign-in" : `/sign-in?next=${encodeURIComponent(here)}`, {
    replace: true,
  });
}

whenUnauthorized(() => {
  signOut();
  toSignIn();
});

function Page({ path }: { path: string }) {
  let found: Record<string, string> | null;
  if (match("/jobs", path)) return <Jobs />;
  if (match("/jobs/new", path)) return <NewJob />;
  if ((found = match("/jobs/:id", path))) return <Job key={found.id} id={found.id} />;
  if (match("/runs", path)) return <Runs />;
  if ((found = match("/runs/:id", path))) return <Run key={found.id} id={found.id} />;
  if (match("/health", path)) return <Health />;
  return (
    <main>
      <h1>Not found</h1>
      <p>
        Nothing in the console at <code>{path}</code>. <Link href="/jobs">Go to the jobs</Link>.
      </p>
    </main>
  );
}

const NAVIGATION: [string, string][] = [
  ["/jobs", "Jobs"],
  ["/runs", "Dead letters"],
  ["/health", "Health"],
];

function App() {
  const location = useLocation();
  const signedIn = token() !== null;
  const path = location.path;

  useEffect(() => {
    if (!signedIn && path !== "/sign-in") toSignIn();
    else if (path === "/" || path === "") navigate("/jobs", { replace: true });
  }, [signedIn, path]);

  useEffect(() => {
    const section = NAVIGATION.find(([prefix]) => path.startsWith(prefix))?.[1];
    document.title = section ? `${section} · tickwork` : "tickwork";
  }, [path]);

  if (path === "/sign-in" || !signedIn) return <SignIn />;
  return (
    <>
      <header class="top">
        <Link href="/jobs" class="brand">
          tickwork
        </Link>
        <nav aria-label="sections">
          {NAVIGATION.map(([prefix, label]) => (
            <Link href={prefix} class={path.startsWith(prefix) ? "current" : ""} key={prefix}>
              {label}
            </Link>
          ))}
        </nav>
        <button
          type="button"
          class="quiet"
          onClick={() => {
            signOut();
            navigate("/sign-in");
          }}
        >
          Sign out
        </button>
      </header>
      <Page path={path} />
    </>
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
