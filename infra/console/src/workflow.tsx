// A workflow run's tasks as a graph: one node per task of the workflow's definition (its job's target), with
// the status of the task's run, or WAITING while it has none; one arrow per dependency, parent to child. The
// nodes are laid out in layers by @dagrejs/dagre, loaded only on a workflow run's page. A table of the same
// tasks comes after the graph: it reads well to a screen reader and on any width.
import type { ComponentChildren } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";

import { FINAL, type Run, type TaskRun, type WorkflowTask } from "./api";
import { Problem, Status, When, useWidth } from "./components";
import { when } from "./format";
import { Link, href } from "./router";

type Dagre = typeof import("@dagrejs/dagre").default;

/** What a task of a workflow run shows as while it has no run: not started yet. */
export const WAITING = "WAITING";

let loading: Promise<Dagre> | null = null;

/** The layout library, loaded once (a chunk of its own, fetched the first time a workflow run is shown). */
function useDagre(): { dagre: Dagre | null; error: Error | null } {
  const [found, setFound] = useState<{ dagre: Dagre | null; error: Error | null }>({ dagre: null, error: null });
  useEffect(() => {
    let gone = false;
    loading ??= import("@dagrejs/dagre").then((module) => module.default);
    loading.then(
      (dagre) => !gone && setFound({ dagre, error: null }),
      (error: Error) => {
        loading = null; // tried again on the next page that needs it
        if (!gone) setFound({ dagre: null, error });
      },
    );
    return () => {
      gone = true;
    };
  }, []);
  return found;
}

interface Point {
  x: number;
  y: number;
}

export interface Layout {
  /** Layers left to right ("LR") or top to bottom ("TB"). */
  direction: "LR" | "TB";
  width: number;
  height: number;
  /** Each task's box, by its id: its top-left corner. */
  nodes: Map<string, Point>;
  edges: { from: string; to: string; points: Point[] }[];
}

interface Size {
  width: number;
  height: number;
}

/** Node boxes: narrower when the graph has little room (a phone). */
const WIDE: Size = { width: 184, height: 104 };
const NARROW: Size = { width: 148, height: 104 };
const NARROW_BELOW_PX = 560;

/** The tasks' boxes and arrows, each task in the layer after its deepest parent's. */
function layOut(dagre: Dagre, tasks: { id: string; depends_on: string[] }[], direction: "LR" | "TB", size: Size): Layout {
  const graph = new dagre.graphlib.Graph();
  graph.setGraph({ rankdir: direction, nodesep: 16, ranksep: direction === "LR" ? 44 : 36, marginx: 2, marginy: 2 });
  graph.setDefaultEdgeLabel(() => ({}));
  const known = new Set(tasks.map((task) => task.id));
  for (const task of tasks) graph.setNode(task.id, { width: size.width, height: size.height });
  for (const task of tasks)
    for (const parent of task.depends_on) if (known.has(parent)) graph.setEdge(parent, task.id);
  dagre.layout(graph);
  const nodes = new Map<string, Point>();
  for (const id of graph.nodes()) {
    const node = graph.node(id);
    nodes.set(id, { x: node.x - size.width / 2, y: node.y - size.height / 2 });
  }
  const edges = graph.edges().map((edge) => ({ from: edge.v, to: edge.w, points: graph.edge(edge).points ?? [] }));
  const { width = 0, height = 0 } = graph.graph();
  return { direction, width: Math.ceil(width), height: Math.ceil(height), nodes, edges };
}

/** A smooth path through dagre's points: straight to the first, curving through the middle ones. */
function path(points: Point[]): string {
  if (!points.length) return "";
  const round = (value: number) => Math.round(value * 10) / 10;
  let d = `M${round(points[0].x)},${round(points[0].y)}`;
  for (let index = 1; index < points.length - 1; index++) {
    const here = points[index];
    const next = points[index + 1];
    d += ` Q${round(here.x)},${round(here.y)} ${round((here.x + next.x) / 2)},${round((here.y + next.y) / 2)}`;
  }
  const last = points[points.length - 1];
  return `${d} L${round(last.x)},${round(last.y)}`;
}

/** The tone of a status, for the node's edge and the arrows leaving it. */
function tone(status: string): string {
  switch (status) {
    case "SUCCEEDED":
      return "ok";
    case "FAILED":
    case "DEAD":
    case "ABANDONED":
      return "bad";
    case "RETRY_WAIT":
    case "MISSED":
    case "SKIPPED":
    case "CANCELLED":
      return "warn";
    case WAITING:
      return "waiting";
    default:
      return "info";
  }
}

export interface TaskRow {
  id: string;
  depends_on: string[];
  run: TaskRun | null;
  status: string;
}

/** The definition's tasks in its order, each with its run; a run whose task the definition no longer has
 * (the job was changed since) comes last, with no arrows. */
export function taskRows(definition: WorkflowTask[] | null, runs: TaskRun[]): TaskRow[] {
  const byTask = new Map(runs.map((run) => [run.task_id, run]));
  const rows: TaskRow[] = (definition ?? []).map((task) => {
    const run = byTask.get(task.id) ?? null;
    return { id: task.id, depends_on: task.depends_on, run, status: run?.status ?? WAITING };
  });
  const defined = new Set(rows.map((row) => row.id));
  for (const run of runs)
    if (!defined.has(run.task_id)) rows.push({ id: run.task_id, depends_on: [], run, status: run.status });
  return rows;
}

/** "4 tasks: 1 SUCCEEDED, 1 RUNNING, 2 WAITING". */
function counts(rows: TaskRow[]): string {
  const by = new Map<string, number>();
  for (const row of rows) by.set(row.status, (by.get(row.status) ?? 0) + 1);
  const parts = [...by].map(([status, count]) => `${count} ${status}`);
  return `${rows.length} task${rows.length === 1 ? "" : "s"}: ${parts.join(", ")}`;
}

function TaskLink({ row, children, ...rest }: { row: TaskRow; children: ComponentChildren; [more: string]: unknown }) {
  if (!row.run) return <div {...rest}>{children}</div>;
  return (
    <Link href={href("/runs", row.run.run_id)} {...rest}>
      {children}
    </Link>
  );
}

/** A time in `zone` without the zone's name (the graph's caption names it), the API's value on hover. */
function Clock({ value, zone }: { value: string | null; zone: string }) {
  if (!value) return <>—</>;
  const text = when(value, zone);
  return (
    <time dateTime={value} title={value}>
      {text.slice(0, text.lastIndexOf(" "))}
    </time>
  );
}

/** One task's box, a line each: its id, status, attempts and times; a link to its run when it has one. */
function Node({ row, at, size, zone }: { row: TaskRow; at: Point; size: Size; zone: string }) {
  const run = row.run;
  return (
    <TaskLink
      row={row}
      class={`dag-node ${tone(row.status)}`}
      data-task-id={row.id}
      data-status={row.status}
      style={{ left: `${at.x}px`, top: `${at.y}px`, width: `${size.width}px`, height: `${size.height}px` }}
    >
      <code class="dag-id" title={row.id}>
        {row.id}
      </code>
      <span class="dag-line">
        <Status value={row.status} />
      </span>
      {run ? (
        <>
          <span class="dag-line" data-field="attempts">
            <span class="muted">attempt </span>
            {run.attempt}
          </span>
          <span class="dag-line">
            <span class="muted">start </span>
            <Clock value={run.started_at} zone={zone} />
          </span>
          <span class="dag-line">
            <span class="muted">end </span>
            <Clock value={run.finished_at} zone={zone} />
          </span>
        </>
      ) : (
        <span class="dag-line muted">not started</span>
      )}
    </TaskLink>
  );
}

/** The graph, drawn at the width it has: layers left to right when they fit, else top to bottom (a phone);
 * wider than both, it scrolls sideways within its box. */
function Graph({ dagre, rows, zone }: { dagre: Dagre; rows: TaskRow[]; zone: string }) {
  const box = useRef<HTMLDivElement>(null);
  const room = useWidth(box, 1000);
  const size = room < NARROW_BELOW_PX ? NARROW : WIDE;
  const shape = rows.map((row) => `${row.id}<${row.depends_on.join(",")}`).join(";");
  const layouts = useMemo(
    () => ({ LR: layOut(dagre, rows, "LR", size), TB: layOut(dagre, rows, "TB", size) }),
    [dagre, shape, size],
  );
  const layout =
    layouts.LR.width <= room
      ? layouts.LR
      : layouts.TB.width <= room || layouts.TB.width < layouts.LR.width
        ? layouts.TB
        : layouts.LR;
  const status = new Map(rows.map((row) => [row.id, row.status]));
  const scrolls = layout.width > room;
  return (
    <div
      ref={box}
      class="dag"
      role="group"
      aria-label="task graph"
      data-direction={layout.direction}
      tabIndex={scrolls ? 0 : undefined}
    >
      <div class="dag-canvas" style={{ width: `${layout.width}px`, height: `${layout.height}px` }}>
        <svg width={layout.width} height={layout.height} viewBox={`0 0 ${layout.width} ${layout.height}`} aria-hidden="true">
          <defs>
            {["ok", "bad", "warn", "info", "waiting"].map((name) => (
              <marker
                key={name}
                id={`dag-arrow-${name}`}
                class={`dag-arrow ${name}`}
                viewBox="0 0 10 10"
                refX={9}
                refY={5}
                markerWidth={7}
                markerHeight={7}
                orient="auto"
              >
                <path d="M0,0 L10,5 L0,10 z" />
              </marker>
            ))}
          </defs>
          {layout.edges.map((edge) => {
            const from = tone(status.get(edge.from) ?? WAITING);
            return (
              <path
                key={`${edge.from}>${edge.to}`}
                class={`dag-edge ${from}`}
                data-from={edge.from}
                data-to={edge.to}
                d={path(edge.points)}
                marker-end={`url(#dag-arrow-${from})`}
              />
            );
          })}
        </svg>
        {rows.map((row) => {
          const at = layout.nodes.get(row.id);
          return at ? <Node key={row.id} row={row} at={at} size={size} zone={zone} /> : null;
        })}
      </div>
    </div>
  );
}

/** A workflow run's tasks: the graph, then the same tasks in a table. `definition` is null until the job is
 * read (or when it cannot be): the table then lists the tasks that have a run. */
export function WorkflowRun({
  run,
  definition,
  zone,
}: {
  run: Run;
  definition: WorkflowTask[] | null;
  zone: string;
}) {
  const { dagre, error } = useDagre();
  const rows = taskRows(definition, run.tasks ?? []);
  const ended = FINAL.includes(run.status);
  return (
    <section class="card" aria-label="workflow tasks">
      <h2>Tasks</h2>
      <p class="muted" data-field="task-counts">
        {counts(rows)}
        {!ended && rows.some((row) => !row.run) ? ". A WAITING task starts once the tasks it depends on allow it." : ""}
      </p>
      <Problem error={error} />
      {definition && dagre && rows.length ? (
        <figure class="dag-figure">
          <figcaption class="muted">
            Each arrow goes from a task to a task that depends on it; times in <span class="zone">{zone}</span>.
          </figcaption>
          <Graph dagre={dagre} rows={rows} zone={zone} />
        </figure>
      ) : null}
      <table class="list" aria-label="tasks">
        <thead>
          <tr>
            <th>Task</th>
            <th>Status</th>
            <th>Attempts</th>
            <th>Started</th>
            <th>Finished</th>
            <th>Depends on</th>
            <th>Error</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={row.id} data-task-id={row.id}>
              <td data-label="Task" class="title">
                {row.run ? (
                  <Link href={href("/runs", row.run.run_id)}>
                    <code>{row.id}</code>
                  </Link>
                ) : (
                  <code>{row.id}</code>
                )}
              </td>
              <td data-label="Status">
                <Status value={row.status} />
              </td>
              <td data-label="Attempts">{row.run ? row.run.attempt : "—"}</td>
              <td data-label="Started" class="wide">
                <When value={row.run?.started_at} zone={zone} />
              </td>
              <td data-label="Finished" class="wide">
                <When value={row.run?.finished_at} zone={zone} />
              </td>
              <td data-label="Depends on" class="span">
                {row.depends_on.length ? row.depends_on.map((parent) => <code class="tag" key={parent}>{parent}</code>) : "—"}
              </td>
              <td data-label="Error" class="error-text span">
                {row.run?.error_code ? <code>{row.run.error_code}</code> : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
