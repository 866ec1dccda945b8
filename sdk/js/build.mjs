#!/usr/bin/env node
// Builds one JavaScript wasm-informer plugin into a WebAssembly component with
// componentize-js, for world `event-handler` or `controller` of wit/.
//
// Usage: node sdk/js/build.mjs SOURCE.js OUT.wasm [--world event-handler|controller] [--wit WIT_DIR]
//
// Without --world, the world is taken from the source: a comment line
// `wasm-informer-world: controller` (or `event-handler`) names it; otherwise a
// module that exports `reconciler` is a controller, and any other an event
// handler. The chosen world is printed with the result.
//
// The plugin may import other modules by relative path (for example the SDK
// helper `sdk/js/src/informer.js`). componentize-js only sees files under the
// working directory, so the build runs from the deepest directory that holds
// both the plugin and the SDK.
import { componentize } from '@bytecodealliance/componentize-js';
import { mkdir, readFile, writeFile, stat } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const WORLDS = ['event-handler', 'controller'];
const USAGE =
  'usage: node sdk/js/build.mjs SOURCE.js OUT.wasm [--world event-handler|controller] [--wit WIT_DIR]';

function usage(msg) {
  console.error(`build.mjs: ${msg}\n${USAGE}`);
  process.exit(2);
}

const args = process.argv.slice(2);
let witDir = join(here, '../../wit');
let world;
const positional = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--wit' || a === '--world') {
    if (i + 1 >= args.length) usage(`${a} needs a value`);
    if (a === '--wit') witDir = args[++i];
    else world = args[++i];
  } else if (a.startsWith('--')) {
    usage(`unknown option ${a}`);
  } else {
    positional.push(a);
  }
}
if (positional.length !== 2) usage('expected SOURCE.js and OUT.wasm');
if (world !== undefined && !WORLDS.includes(world)) usage(`--world must be one of ${WORLDS.join(', ')}`);
const source = resolve(positional[0]);
const out = resolve(positional[1]);
witDir = resolve(witDir);

for (const [what, path] of [['plugin source', source], ['WIT directory', witDir]]) {
  try {
    await stat(path);
  } catch {
    usage(`${what} ${path} does not exist`);
  }
}

/** The world a plugin source declares (marker comment) or implies (its exports). */
function detectWorld(text) {
  const marker = /wasm-informer-world:\s*([a-z-]+)/.exec(text);
  if (marker) {
    if (!WORLDS.includes(marker[1])) {
      usage(`the source names world ${marker[1]}; expected one of ${WORLDS.join(', ')}`);
    }
    return marker[1];
  }
  if (/^\s*export\s+(const|let|var|function)\s+reconciler\b/m.test(text)) return 'controller';
  return 'event-handler';
}
world ??= detectWorld(await readFile(source, 'utf8'));

function commonAncestor(a, b) {
  const pa = a.split(sep);
  const pb = b.split(sep);
  let i = 0;
  while (i < pa.length && i < pb.length && pa[i] === pb[i]) i++;
  return pa.slice(0, i).join(sep) || sep;
}
const root = commonAncestor(dirname(source), here);
if (root === sep) {
  // componentize-js resolves the module paths relative to the working
  // directory and cannot do so from the file system root.
  usage(`${positional[0]} shares no directory with the SDK (${here}): put the plugin inside the repository`);
}
process.chdir(root);

const started = Date.now();
let result;
try {
  result = await componentize({
    sourcePath: source,
    witPath: witDir,
    worldName: world,
    // Without this the component imports wasi:http, which the host does not provide.
    disableFeatures: ['http', 'fetch-event'],
  });
} catch (e) {
  console.error(`build.mjs: componentize ${positional[0]} (world ${world}) failed: ${e?.message ?? e}`);
  process.exit(1);
}
await mkdir(dirname(out), { recursive: true });
await writeFile(out, result.component);
const kb = (result.component.byteLength / 1024).toFixed(0);
const secs = ((Date.now() - started) / 1000).toFixed(1);
console.error(`build.mjs: ${positional[0]} -> ${positional[1]} (world ${world}, ${kb} KiB, ${secs} s)`);
