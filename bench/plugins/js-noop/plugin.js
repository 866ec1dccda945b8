// No-op wasm-informer plugin in JavaScript, used by the hot-reload benchmark (B6):
// it accepts every event and does nothing else, so the measured time is the
// runtime's (compile, instantiate, replay), not the plugin's.
import { definePlugin } from '../../../sdk/js/src/informer.js';

export const handler = definePlugin({
  init(_config) {},
  onEvent(_event) {},
});
