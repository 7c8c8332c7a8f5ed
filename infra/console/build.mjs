// Bundles src/ into dist/: index.html, assets/main-<hash>.js and .css (and a chunk for what only some pages
// load: the workflow graph's layout library), favicon.svg, licenses.txt.
// `node build.mjs --watch` rebuilds on every change, for `tickwork local` to serve as it runs.
import { cp, mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

import * as esbuild from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, "dist");
const watch = process.argv.includes("--watch");
// Runtime dependencies whose licence notices ship with the bundle.
const BUNDLED = ["preact", "uplot", "@dagrejs/dagre", "@dagrejs/graphlib"];

/** index.html from the template, naming the hashed entry files; then a size report. */
const page = {
  name: "page",
  setup(build) {
    build.onEnd(async (result) => {
      if (result.errors.length) return;
      const outputs = Object.entries(result.metafile.outputs);
      const [js, entry] = outputs.find(([, output]) => output.entryPoint === "src/main.tsx");
      const href = (file) => "/" + path.relative(dist, path.resolve(here, file)).split(path.sep).join("/");
      const template = await readFile(path.join(here, "index.html"), "utf8");
      const html = template.replace("{{js}}", href(js)).replace("{{css}}", href(entry.cssBundle));
      await writeFile(path.join(dist, "index.html"), html);
      await report();
    });
  },
};

async function licences() {
  const notices = [];
  for (const name of BUNDLED) {
    const folder = path.join(here, "node_modules", name);
    const { version, license } = JSON.parse(await readFile(path.join(folder, "package.json"), "utf8"));
    const file = (await readdir(folder)).find((entry) => /^licen[cs]e/i.test(entry));
    const text = file ? await readFile(path.join(folder, file), "utf8") : "";
    notices.push(`${name} ${version} (${license})\n\n${text.trim()}\n`);
  }
  await writeFile(path.join(dist, "licenses.txt"), notices.join("\n" + "-".repeat(72) + "\n\n"));
}

async function report() {
  const rows = [];
  let raw = 0;
  let zipped = 0;
  for (const file of await walk(dist)) {
    if (!/\.(js|css|html)$/.test(file)) continue;
    const bytes = await readFile(file);
    const gz = gzipSync(bytes, { level: 9 }).length;
    raw += bytes.length;
    zipped += gz;
    rows.push(`  ${path.relative(dist, file).padEnd(32)} ${kb(bytes.length).padStart(9)} ${kb(gz).padStart(9)} gzip`);
  }
  console.log(`console built in ${path.relative(process.cwd(), dist) || "."}:\n${rows.join("\n")}`);
  console.log(`  ${"total".padEnd(32)} ${kb(raw).padStart(9)} ${kb(zipped).padStart(9)} gzip`);
}

async function walk(folder) {
  const found = [];
  for (const entry of await readdir(folder, { withFileTypes: true })) {
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) found.push(...(await walk(full)));
    else found.push(full);
  }
  return found.sort();
}

const kb = (bytes) => `${(bytes / 1024).toFixed(1)} kB`;

const options = {
  absWorkingDir: here,
  entryPoints: ["src/main.tsx"],
  bundle: true,
  format: "esm",
  target: ["es2022", "chrome111", "firefox114", "safari16.4"],
  minify: !watch,
  sourcemap: watch ? "linked" : false,
  outdir: "dist/assets",
  // What only some pages need (the workflow graph's layout) loads as a chunk of its own, when first needed.
  splitting: true,
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  jsx: "automatic",
  jsxImportSource: "preact",
  metafile: true,
  legalComments: "none",
  logLevel: "warning",
  plugins: [page],
};

if (!watch) await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });
await cp(path.join(here, "public"), dist, { recursive: true });
await licences();
if (watch) {
  const context = await esbuild.context(options);
  await context.watch();
  console.log("watching src/ (Ctrl-C stops)");
} else {
  await esbuild.build(options);
}
