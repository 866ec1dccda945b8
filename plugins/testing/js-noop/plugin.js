// js-noop: a JavaScript plugin of world event-handler 0.2 that reads nothing
// and does nothing, through the SDK: the per-event cost of the language and
// the SDK alone, measured against plugins/testing/js-v01 (the same in 0.1).
import { definePlugin } from '../../../sdk/js/src/informer.js';

export const handler = definePlugin({
  onEvent() {},
});
