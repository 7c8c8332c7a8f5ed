import { useState } from "preact/hooks";

import { ApiError, call, signIn } from "../api";
import { Field } from "../components";
import { navigate, useLocation } from "../router";

/** Paste a tenant token; it is checked against the API before it is kept (in sessionStorage). */
export function SignIn() {
  const location = useLocation();
  const [value, setValue] = useState("");
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    const candidate = value.trim();
    if (!candidate) {
      setError("paste a tenant token");
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      await call("GET", "/v1/stats", { bearer: candidate });
      signIn(candidate);
      const next = location.query.get("next");
      navigate(next && next.startsWith("/") && !next.startsWith("//") ? next : "/jobs", { replace: true });
    } catch (caught) {
      setError(
        caught instanceof ApiError && caught.status === 401
          ? "the API refused this token"
          : (caught as Error).message,
      );
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <h1>tickwork</h1>
      <form onSubmit={submit} class="card">
        <Field
          label="Tenant token"
          name="token"
          error={error}
          hint="Kept in this tab only (sessionStorage) and sent as Authorization: Bearer."
        >
          <input
            id="token"
            name="token"
            type="password"
            autocomplete="off"
            spellcheck={false}
            value={value}
            onInput={(event) => setValue(event.currentTarget.value)}
          />
        </Field>
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
      </form>
      <p class="hint">
        <code>tickwork local</code> prints a token at start-up; on AWS, <code>tickwork tenants create</code> makes one.
      </p>
    </main>
  );
}
