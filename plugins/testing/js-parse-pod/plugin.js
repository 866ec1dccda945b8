// js-parse-pod: a benchmark plugin in JavaScript that parses the JSON of every
// event's object (JSON.parse, as any JavaScript handler that reads its objects
// does) and counts the containers it saw, so the parse cannot be skipped. The
// throughput benchmark (B1) runs it beside the Rust no-op and parse plugins.
// Invariant: every event is parsed; a body that is not a Pod with a spec throws
// (a handler error).
import { definePlugin } from '../../../sdk/js/src/informer.js';

let containers = 0;

export const handler = definePlugin({
  init(_config) {},
  onEvent(event) {
    const pod = JSON.parse(event.object.json);
    if (!pod.spec) throw new Error(`${event.key} has no spec`);
    containers += (pod.spec.containers ?? []).length;
  },
});
