// Declarations for the wasm-informer JavaScript plugin SDK (src/informer.js).
/// <reference path="./wit/event-handler.d.ts" />
import type {
  Event,
  ObjectView,
  ObjectMeta,
} from 'wasm-informer:plugin/types@0.1.0';
import type { Level } from 'wasm-informer:plugin/log@0.1.0';

export type { Event, ObjectView, ObjectMeta, Level };

/** Writes one message to the host log. */
export function log(level: Level, message: unknown): void;
export function trace(message: unknown): void;
export function debug(message: unknown): void;
export function info(message: unknown): void;
export function warn(message: unknown): void;
export function error(message: unknown): void;

/** A failed cache query; `kind` is the WIT `cache-error` case. */
export class CacheError extends Error {
  kind: 'forbidden' | 'unknown-resource' | 'invalid-selector' | 'unknown-index';
  detail: string;
}

/** Typed, throwing wrappers over the `cache` import. */
export const cache: {
  get(resource: string, key: string): ObjectView | undefined;
  list(resource: string, opts?: { namespace?: string; labelSelector?: string }): ObjectView[];
  byIndex(resource: string, indexName: string, value: string): ObjectView[];
  hasSynced(resource: string): boolean;
};

export function labels(view: ObjectView | ObjectMeta): Record<string, string>;
export function annotations(view: ObjectView | ObjectMeta): Record<string, string>;
/** The parsed JSON body of an object view. */
export function body(view: ObjectView): any;
/** `namespace/name`, or `name` for cluster-scoped objects. */
export function keyOf(view: ObjectView | ObjectMeta): string;
export function isLive(event: Event): boolean;
export function isDeleted(event: Event): boolean;
/** True when the cache already holds a newer version of the event's object. */
export function isStale(event: Event): boolean;

export interface Plugin {
  /** Receives the manifest's [config] table, parsed. Throw to refuse it. */
  init?(config: Record<string, unknown>): void;
  /** Handles one event. Throw to report a handler error. */
  onEvent(event: Event): void;
}

/** The exported WIT `handler` interface built from a plugin object. */
export function definePlugin(plugin: Plugin): {
  init(config: string): void;
  onEvent(event: Event): void;
};
