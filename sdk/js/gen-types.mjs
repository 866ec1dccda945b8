#!/usr/bin/env node
// Generates the TypeScript declarations of both wasm-informer WIT worlds
// (`event-handler` and `controller`) into sdk/js/types/wit/ with jco's type
// generator (guest view: what a plugin imports and what it must export). The
// worlds share their interfaces, so they share interfaces/*.d.ts; each world
// has its own top-level file.
//
// jco 1.35 runs its type generator as a WASI component whose default
// preopen list is empty, so it cannot read any WIT path (`jco types` fails
// with "No such file or directory"). This script gives the generator a
// preopen for "/" first, then runs it.
//
// Usage: node sdk/js/gen-types.mjs [WIT_DIR] [OUT_DIR]
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const witDir = resolve(process.argv[2] ?? join(here, '../../wit'));
const outDir = resolve(process.argv[3] ?? join(here, 'types/wit'));

// The shim instance that jco-transpile's generator links against.
const transpileDir = join(here, 'node_modules/@bytecodealliance/jco-transpile');
const shimFs = join(
  transpileDir,
  'node_modules/@bytecodealliance/preview2-shim/dist/nodejs/filesystem.js',
);
const { _setPreopens } = await import(pathToFileURL(shimFs).href);
_setPreopens({ '/': '/' });

const { generateGuestTypes } = await import(
  pathToFileURL(join(transpileDir, 'dist/typegen.js')).href
);

const written = new Map();
for (const world of ['event-handler', 'controller']) {
  const files = await generateGuestTypes(witDir, {
    worldName: `wasm-informer:plugin/${world}`,
    name: world,
    outDir: outDir + '/',
  });
  for (const [path, content] of Object.entries(files)) {
    const text = typeof content === 'string' ? content : new TextDecoder().decode(content);
    if (written.has(path) && written.get(path) !== text) {
      throw new Error(`gen-types: the worlds disagree about ${path}`);
    }
    if (written.has(path)) continue;
    written.set(path, text);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, text);
    console.error(`gen-types: wrote ${path}`);
  }
}
