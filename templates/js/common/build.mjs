// Builds plugin.js into dist/{{name}}.wasm, world {{world}}: `npm run build`.
//
// The first build installs the pinned componentize-js (`npm ci`, from
// package-lock.json); the build itself is the SDK's own build script
// (vendor/wasm-informer/build.mjs), as the SDK's examples are built.
import { existsSync } from 'node:fs';
import { execSync } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

process.chdir(dirname(fileURLToPath(import.meta.url)));
if (!existsSync('node_modules/@bytecodealliance/componentize-js')) {
  console.error('build: installing componentize-js (first build only)');
  execSync('npm ci --no-audit --no-fund', { stdio: ['ignore', 'ignore', 'inherit'] });
}
process.argv = [
  process.argv[0],
  'vendor/wasm-informer/build.mjs',
  'plugin.js',
  'dist/{{name}}.wasm',
  '--wit',
  'wit',
  '--world',
  '{{world}}',
];
await import('./vendor/wasm-informer/build.mjs');
