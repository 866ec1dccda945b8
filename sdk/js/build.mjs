#!/usr/bin/env node
// Builds one JavaScript wasm-informer plugin into a WebAssembly component with
// componentize-js, targeting world `event-handler` of wit/.
//
// Usage: node sdk/js/build.mjs SOURCE.js OUT.wasm [--wit WIT_DIR]
//
// The plugin may import other modules by relative path (for example the SDK
// helper `sdk/js/src/informer.js`). componentize-js only sees files under the
// working directory, so the build runs from the deepest directory that holds
// both the plugin and the SDK.
import { componentize } from '@bytecodealliance/componentize-js';
import { mkdir, writeFile, stat } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

function usage(msg) {
  console.error(`build.mjs: ${msg}\nusage: node sdk/js/build.mjs SOURCE.js OUT.wasm [--wit WIT_DIR]`);
  process.exit(2);
}

const args = process.argv.slice(2);
let witDir = join(here, '../../wit');
const positional = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--wit') {
    if (i + 1 >= args.length) usage('--wit needs a directory');
    witDir = args[++i];
  } else {
    positional.push(args[i]);
  }
}
if (positional.length !== 2) usage('expected SOURCE.js and OUT.wasm');
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

function commonAncestor(a, b) {
  const pa = a.split(sep);
  const pb = b.split(sep);
  let i = 0;
  while (i < pa.length && i < pb.length && pa[i] === pb[i]) i++;
  return pa.slice(0, i).join(sep) || sep;
}
process.chdir(commonAncestor(dirname(source), here));

const started = Date.now();
let result;
try {
  result = await componentize({
    sourcePath: source,
    witPath: witDir,
    worldName: 'event-handler',
    // Without this the component imports wasi:http, which the host does not provide.
    disableFeatures: ['http', 'fetch-event'],
  });
} catch (e) {
  console.error(`build.mjs: componentize ${positional[0]} failed: ${e?.message ?? e}`);
  process.exit(1);
}
await mkdir(dirname(out), { recursive: true });
await writeFile(out, result.component);
const kb = (result.component.byteLength / 1024).toFixed(0);
console.error(`build.mjs: ${positional[0]} -> ${positional[1]} (${kb} KiB, ${((Date.now() - started) / 1000).toFixed(1)} s)`);
