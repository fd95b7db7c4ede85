// testdata/provider.mjs is provider.mjs with tools that only the test needs added:
// node_test.go runs it (node testdata/provider.mjs --addr ...) against a fake toolsd.
import { setTimeout as sleep } from 'node:timers/promises';
import { main, tools } from '../provider.mjs';

const object = JSON.stringify({ type: 'object' });

// fail_on_cancel reports progress, waits for its cancel, then fails on its own (say, its
// cleanup failed): a failure, not the cancellation it was given.
tools.fail_on_cancel = {
  definition: { name: 'fail_on_cancel', description: 'Fails once cancelled.', parametersJson: object },
  run: async (_, { signal, progress }) => {
    progress('running');
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    throw new Error('cleanup failed after the cancel');
  },
};

// report_after_cancel reports progress, waits for its cancel, reports progress again
// (which toolsd has no use for any more), then stops as cancelled.
tools.report_after_cancel = {
  definition: { name: 'report_after_cancel', description: 'Reports progress after its cancel.', parametersJson: object },
  run: async (_, { signal, progress }) => {
    progress('running');
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    progress('after the cancel');
    throw signal.reason;
  },
};

// stop_slowly reports progress, waits for its cancel, then returns ms later. Its timer
// does not keep the process running: the provider can exit without it.
tools.stop_slowly = {
  definition: { name: 'stop_slowly', description: 'Returns a while after its cancel.', parametersJson: object },
  run: async ({ ms }, { signal, progress }) => {
    progress('running');
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    await sleep(ms, undefined, { ref: false });
    return `stopped ${ms} ms after the cancel`;
  },
};

// stop_on_cue reports progress, waits for its cancel and then for SIGUSR2 (the test's
// cue, listened for from the start), then stops as cancelled: a tool slow to stop, whose
// call toolsd can still cancel after the provider's own shutdown aborted it.
tools.stop_on_cue = {
  definition: { name: 'stop_on_cue', description: 'Stops as cancelled on SIGUSR2 after its cancel.', parametersJson: object },
  run: async (_, { signal, progress }) => {
    const cue = new Promise((resolve) => process.once('SIGUSR2', resolve));
    progress('running');
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    await cue;
    throw signal.reason;
  },
};

// ignore_cancel reports progress, then waits an hour, whatever it is told: a tool that
// does not stop on its signal (a request it cannot abort, say). Its timer keeps the
// process running.
tools.ignore_cancel = {
  definition: { name: 'ignore_cancel', description: 'Waits an hour, cancelled or not.', parametersJson: object },
  run: async (_, { progress }) => {
    progress('running');
    await sleep(3600_000);
    return 'waited an hour';
  },
};

// throw_odd throws values String() cannot turn into text: an object without a
// prototype, or one whose message getter throws.
tools.throw_odd = {
  definition: { name: 'throw_odd', description: 'Throws an unprintable value.', parametersJson: object },
  run: async ({ kind }) => {
    if (kind === 'getter') {
      throw Object.defineProperty({}, 'message', { get() { throw new Error('no message'); } });
    }
    throw Object.create(null);
  },
};

// report sends its text as a progress message, then succeeds.
tools.report = {
  definition: { name: 'report', description: 'Reports its text as progress.', parametersJson: object },
  run: async ({ text }, { progress }) => {
    progress(text);
    return 'reported';
  },
};

// returns returns what its kind names: a string, or a value that is not one.
const returned = {
  string: () => 'a string',
  number: () => 42,
  undefined: () => undefined,
  null: () => null,
  array: () => [104, 105],
  object: () => ({ text: 'hi' }),
  boolean: () => true,
  boxed: () => new String('boxed'),
};
tools.returns = {
  definition: { name: 'returns', description: 'Returns a value of the kind asked for.', parametersJson: object },
  run: async ({ kind }) => returned[kind](),
};

// large_1 to large_5 have descriptions of 300,000 bytes: 1.5 MiB of definitions, which
// do not fit in one register message.
for (let i = 1; i <= 5; i++) {
  tools[`large_${i}`] = {
    definition: { name: `large_${i}`, description: 'd'.repeat(300_000), parametersJson: object },
    run: async () => 'large',
  };
}

await main();
