// js-faulty: a deliberately misbehaving JavaScript plugin for the
// fault-containment tests. [config] mode = "spin" loops forever, "throw" throws
// (a handler error), "ok" behaves; `every` = N misbehaves only on every Nth
// event (default 1). Every handled event logs `handled key=KEY n=N`.
import { definePlugin, info } from '../../../sdk/js/src/informer.js';

let mode = 'ok';
let every = 1;
let n = 0;

export const handler = definePlugin({
  init(config) {
    mode = config.mode ?? 'ok';
    every = config.every ?? 1;
    if (!['ok', 'spin', 'throw'].includes(mode)) throw new Error(`config.mode ${mode} is not ok|spin|throw`);
    if (!Number.isInteger(every) || every < 1) throw new Error('config.every must be a positive integer');
  },
  onEvent(event) {
    n += 1;
    if (n % every === 0) {
      if (mode === 'spin') {
        // eslint-disable-next-line no-constant-condition
        for (let i = 0; ; i++) {
          if (i < 0) break;
        }
      }
      if (mode === 'throw') throw new Error(`boom key=${event.key} n=${n}`);
    }
    info(`handled key=${event.key} n=${n}`);
  },
});
