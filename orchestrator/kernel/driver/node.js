// Berth's JavaScript kernel driver. Berth embeds this file and feeds it to
// node through a loader given with -e, so no file is left behind; the loader
// evaluates it and calls the function below with its require. It speaks the
// bridge protocol (see package bridge): frames from Berth arrive on fd 3
// (the process's original stdin, moved there by the starting shell, which
// put /dev/null on stdin), frames to Berth leave on stdout. Node cannot
// repoint fd 1, so user writes through process.stdout, process.stderr and
// console are captured in-process, and anything that still reaches fd 1 (a
// child started with stdio "inherit", fs.writeSync(1)) arrives as bytes
// outside a frame, which Berth shows as output. That is the one gap the
// Python driver does not have: such a write of more than a pipe's atomic
// size (4 KB) can land inside a large frame and tear it, and that frame's
// output is shown as raw text; the frames after it, and every small frame
// such as done, arrive intact.
(function (require) {
  'use strict';
  const fs = require('fs');
  const vm = require('vm');
  const util = require('util');
  const path = require('path');
  const readline = require('readline');
  const net = require('net');
  const Module = require('module');

  const VERSION = 1;
  const DRIVER_FILE = '<berth-driver>';
  // Node's own REPL rewriter for top-level await; present with
  // --expose-internals, which Berth passes.
  let processTopLevelAwait = null;
  try {
    processTopLevelAwait = require('internal/repl/await').processTopLevelAwait;
  } catch (e) {
    processTopLevelAwait = null;
  }

  // Frames are written to fd 1 synchronously, one frame at a time. Node's
  // own stdout stream queues writes to a pipe in memory without bound, so
  // a cell printing 100 MB would hold it all; a blocking write makes the
  // cell wait for Berth instead. Should fd 1 be non-blocking after all
  // (it is a file description others may share), a full pipe is waited
  // out here. An interrupt (breakOnSigint) can stop
  // this loop between two parts of a large frame: Berth's reader then
  // takes the part for output and reads the next frame whole.
  const pause = new Int32Array(new SharedArrayBuffer(4));
  function send(frame) {
    const buf = Buffer.from('\x1e' + JSON.stringify(frame) + '\n');
    let off = 0;
    while (off < buf.length) {
      try {
        off += fs.writeSync(1, buf, off, buf.length - off);
      } catch (e) {
        if (e.code !== 'EAGAIN') throw e;
        Atomics.wait(pause, 0, 0, 1);
      }
    }
  }

  let current = '';
  let running = false;
  let interruptCell = null;
  let interrupted = false; // an interrupt came while the cell ran
  let cellStart = 0; // performance.now() when the cell began

  function capture(stream) {
    return function (chunk, encoding, cb) {
      const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
      if (text) send({ type: 'output', cell: current, stream: stream, text: text });
      const done = typeof encoding === 'function' ? encoding : cb;
      if (typeof done === 'function') process.nextTick(done);
      return true;
    };
  }
  process.stdout.write = capture('stdout');
  process.stderr.write = capture('stderr');
  // libuv made fd 1 and 2 non-blocking; a child that inherits them (stdio
  // "inherit") would see its writes fail with EAGAIN whenever the pipe is
  // full. Blocking again, it waits like any writer.
  for (const s of [process.stdout, process.stderr]) {
    if (s._handle && typeof s._handle.setBlocking === 'function') s._handle.setBlocking(true);
  }

  // --- tool() re-entry ----------------------------------------------------
  class ToolError extends Error {
    constructor(message) {
      super(message);
      this.name = 'ToolError';
    }
  }
  const calls = new Map();
  let callSeq = 0;
  // cellColumns is the running cell's columnsOf; cleaned holds the errors
  // whose stack cleanStack has made already.
  let cellColumns = null;
  const cleaned = new WeakSet();

  function tool(name, args) {
    if (typeof name !== 'string' || !name) {
      return Promise.reject(new TypeError('tool(name, args): name must be a tool name string'));
    }
    if (args === undefined || args === null) args = {};
    if (typeof args !== 'object' || Array.isArray(args)) {
      return Promise.reject(new TypeError("tool(name, args): args must be an object of the tool's named arguments"));
    }
    const id = String(++callSeq);
    // The ToolError's stack is where the cell called tool(), not the
    // driver's frame reading the answer.
    const site = {};
    Error.captureStackTrace(site, tool);
    return new Promise(function (resolve, reject) {
      calls.set(id, { name: name, resolve: resolve, reject: reject, site: site, columns: cellColumns });
      send({ type: 'tool_call', cell: current, id: id, name: name, arguments: args });
    });
  }

  // toolError's stack is clean already, for the cell that prints it too.
  function toolError(call, message) {
    const err = new ToolError(call.name + ': ' + message);
    const frames = String(call.site.stack);
    err.stack = cleanStack({ stack: 'ToolError: ' + err.message + frames.slice(frames.indexOf('\n')) }, call.columns).replace(/\n$/, '');
    cleaned.add(err);
    return err;
  }

  function toolResult(frame) {
    const call = calls.get(frame.id);
    if (!call) return;
    calls.delete(frame.id);
    if (frame.error) return call.reject(toolError(call, frame.error));
    const result = frame.result || {};
    const content = result.content || [];
    const texts = content.filter(function (b) { return b.type === 'text'; }).map(function (b) { return b.text || ''; });
    if (result.isError) return call.reject(toolError(call, texts.join('\n') || 'failed'));
    call.resolve(texts.length === content.length ? texts.join('\n') : content);
  }

  // --- display ------------------------------------------------------------
  // bundle is value's MIME bundle; a displayed string shows as itself, a
  // returned one quoted, as the REPL shows it.
  function bundle(value, displayed) {
    if (Buffer.isBuffer(value) && value.length > 8 && value.readUInt32BE(0) === 0x89504e47) {
      return { 'image/png': value.toString('base64') };
    }
    if (displayed && typeof value === 'string') return { 'text/plain': value };
    return { 'text/plain': util.inspect(value, { depth: 4, colors: false }) };
  }

  // display(value, ...) shows values; display(bundle, {raw: true}) takes a
  // ready MIME bundle such as {"image/png": base64} or {"text/html": ...}.
  function display() {
    const args = Array.prototype.slice.call(arguments);
    const last = args[args.length - 1];
    const raw = args.length > 1 && last && typeof last === 'object' && last.raw === true;
    if (raw) args.pop();
    for (const v of args) send({ type: 'display', cell: current, data: raw ? v : bundle(v, true) });
  }

  // --- the context --------------------------------------------------------
  const userRequire = Module.createRequire(path.join(process.cwd(), '<eval>'));
  const sandbox = { console: console, process: process, require: userRequire, display: display, tool: tool, ToolError: ToolError };
  for (const name of ['Buffer', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate',
    'clearImmediate', 'queueMicrotask', 'structuredClone', 'URL', 'URLSearchParams', 'TextEncoder', 'TextDecoder',
    'AbortController', 'AbortSignal', 'EventTarget', 'Event', 'fetch', 'Headers', 'Request', 'Response', 'Blob',
    'performance', 'atob', 'btoa', 'crypto', 'WebAssembly']) {
    if (typeof globalThis[name] !== 'undefined') sandbox[name] = globalThis[name];
  }
  const context = vm.createContext(sandbox);

  // cleanStack is what the model reads of an error: the frames of its
  // cells, without Node's own (node:events, node:internal/...) or the
  // driver's. mapColumn, when set (a columnsOf), moves a column of the
  // code that ran back to where it is in the cell, and says null for the
  // top-level-await rewrite's own frame, which is dropped.
  function cleanStack(err, mapColumn) {
    if (!err || typeof err !== 'object') return String(err);
    let stack = String(err.stack || (err.name + ': ' + err.message));
    if (mapColumn) {
      // Node heads an error thrown by a script with the line that threw
      // and a caret under the spot: show the cell's line.
      stack = stack.replace(/^(<cell-[\w-]*>:(\d+)\n)[^\n]*\n( *)(\^+)\n/, function (all, where, line, pad, carets) {
        const column = mapColumn(Number(line), pad.length + 1);
        if (column === null) return '';
        return where + mapColumn.source(Number(line)) + '\n' + ' '.repeat(column - 1) + carets + '\n';
      });
    }
    const out = [];
    for (let l of stack.split('\n')) {
      if (/^\s+at /.test(l)) {
        if (l.indexOf(DRIVER_FILE) >= 0 || /\bnode:[\w/]+/.test(l) || l.indexOf('[eval]') >= 0) continue;
        if (mapColumn) {
          let own = false;
          l = l.replace(/(<cell-[\w-]*>):(\d+):(\d+)/g, function (all, file, line, column) {
            const c = mapColumn(Number(line), Number(column));
            own = own || c === null;
            return file + ':' + line + ':' + c;
          });
          if (own) continue;
        }
      }
      out.push(l);
    }
    return out.join('\n') + '\n';
  }

  // columnsOf maps the columns of ran, the code a cell ran as, back to
  // the cell's own code. What runs differs from the cell within lines
  // only: redeclarable swaps keywords and names a class; Node's rewrite
  // for top-level await (awaited) also inserts ("return { value: (",
  // "void (", parentheses) and puts the hoisted declarations and
  // "(async () => { " before the first line and " })()" after the last.
  // So a line of the cell is matched into the line that ran from the
  // right, character by character, and a column goes to the cell
  // character it holds, or to the next one matched. A column in what the
  // rewrite put around the cell is the rewrite's own frame: null.
  // source(line) is the cell's line.
  function columnsOf(code, ran, awaited) {
    const src = code.split('\n');
    const out = ran.split('\n');
    const head = '(async () => { ';
    const tail = ' })()';
    const map = function (line, column) {
      const o = src[line - 1];
      let w = out[line - 1];
      if (o === undefined || w === undefined || src.length !== out.length) return column;
      const at = column - 1;
      if (awaited && line === 1 && at < w.indexOf(head) + head.length) return null;
      if (awaited && line === out.length && w.endsWith(tail)) {
        w = w.slice(0, w.length - tail.length);
        if (at >= w.length) return null;
      }
      let mapped = o.length;
      for (let j = w.length - 1, i = o.length - 1; j >= at && i >= 0; j--) {
        if (w[j] === o[i]) {
          mapped = i;
          i--;
        }
      }
      return Math.max(1, Math.min(mapped + 1, o.length));
    };
    map.source = function (line) { return src[line - 1]; };
    return map;
  }

  // A notebook runs a cell again after fixing it; a top-level let, const
  // or class would then be "already declared". Declarations that start a
  // line at column 0 become var, which the context keeps and may redeclare.
  function redeclarable(code) {
    return code.replace(/^(?:let|const)(?=\s)/gm, 'var').replace(/^class\s+([A-Za-z_$][\w$]*)/gm, 'var $1 = class $1');
  }

  function isInterrupt(err) {
    return !!err && typeof err === 'object' && /Script execution was interrupted/.test(String(err.message));
  }

  // --- what an interrupted cell started ----------------------------------
  // An interrupt reaches the kernel's whole process group, but a process
  // may ignore it (a shell's background job does) or have left the group
  // (setsid). A kernel reported "intact" after an interrupt must not leave
  // them holding the container's pid limit: the driver ends what the
  // interrupted cell started before it says done. Node's own children are
  // reaped by libuv; orphans by the relay, which adopts them.
  const HZ = 100; // USER_HZ, the unit of /proc/PID/stat's start time
  const RELAY = 'berth-relay';

  // procTable is every process as pid -> {state, ppid, pgrp, start},
  // start in clock ticks since boot.
  function procTable() {
    const table = new Map();
    let names = [];
    try { names = fs.readdirSync('/proc'); } catch (e) { return table; }
    for (const name of names) {
      if (!/^\d+$/.test(name)) continue;
      let stat;
      try { stat = fs.readFileSync('/proc/' + name + '/stat', 'latin1'); } catch (e) { continue; }
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (f.length < 20) continue;
      table.set(Number(name), { state: f[0], ppid: Number(f[1]), pgrp: Number(f[2]), start: Number(f[19]) });
    }
    return table;
  }

  // underRelay: the kernel's parent is Berth's relay, which starts nothing
  // but the kernel and adopts every orphan of its tree (a subreaper).
  function underRelay() {
    try {
      return fs.readFileSync('/proc/' + process.ppid + '/comm', 'latin1').trim() === RELAY;
    } catch (e) {
      return false;
    }
  }

  // strays lists the live processes, other than the kernel and its
  // parent, started at or after since (ticks) that are in the kernel's
  // group or descend from root.
  function strays(table, since, root, group) {
    const children = new Map();
    for (const [pid, p] of table) {
      if (!children.has(p.ppid)) children.set(p.ppid, []);
      children.get(p.ppid).push(pid);
    }
    const tree = new Set();
    const todo = [root];
    while (todo.length) {
      for (const c of children.get(todo.pop()) || []) {
        if (!tree.has(c)) { tree.add(c); todo.push(c); }
      }
    }
    const out = [];
    for (const [pid, p] of table) {
      if (pid === process.pid || pid === process.ppid || p.state === 'Z' || p.state === 'X') continue;
      if (p.start >= since && (p.pgrp === group || tree.has(pid))) out.push(pid);
    }
    return out;
  }

  // endStrays ends every process the cell started that still runs: under
  // the relay every process of the kernel's tree, without it the
  // kernel's group and descendants. Processes of earlier cells are left
  // running; start times count in clock ticks and /proc/uptime in
  // hundredths, so one started up to 20 ms before the cell began counts
  // as the cell's. Kills repeat until a pass finds none,
  // since a process may fork while being killed. It returns how many were
  // ended and which could not be.
  function endStrays() {
    const uptime = Number(fs.readFileSync('/proc/uptime', 'latin1').split(' ')[0]);
    const since = Math.floor((uptime - (performance.now() - cellStart) / 1000) * HZ);
    const self = fs.readFileSync('/proc/self/stat', 'latin1');
    const group = Number(self.slice(self.lastIndexOf(')') + 2).split(' ')[2]);
    const root = underRelay() ? process.ppid : process.pid;
    const ended = new Set();
    const deadline = Date.now() + 3000;
    let left = [];
    for (;;) {
      left = strays(procTable(), since, root, group);
      if (!left.length || Date.now() > deadline) break;
      for (const pid of left) {
        try { process.kill(pid, 'SIGKILL'); ended.add(pid); } catch (e) { /* gone, or not ours */ }
      }
      Atomics.wait(pause, 0, 0, 5);
    }
    return { ended: ended.size, left: left };
  }

  function afterInterrupt(cell) {
    let r;
    try {
      r = endStrays();
    } catch (e) {
      send({ type: 'output', cell: cell, stream: 'stderr', text: 'berth: the processes the interrupted cell started could not be listed (' + e + '); some may still run\n' });
      return;
    }
    if (r.ended) {
      send({ type: 'output', cell: cell, stream: 'stderr', text: 'berth: ended ' + r.ended + ' processes the interrupted cell had started and left running\n' });
    }
    if (r.left.length) {
      send({ type: 'output', cell: cell, stream: 'stderr', text: 'berth: ' + r.left.length + ' processes the interrupted cell started could not be ended: pids ' + r.left.sort(function (a, b) { return a - b; }).join(' ') + '\n' });
    }
  }

  async function runCell(cell, code) {
    current = cell;
    const ran = redeclarable(code);
    let status = 'ok';
    const filename = '<cell-' + cell + '>';
    interrupted = false;
    cellStart = performance.now();
    running = true;
    let columns = columnsOf(code, ran, false);
    try {
      let value;
      let script = null;
      let wrapped = null;
      try {
        script = new vm.Script(ran, { filename: filename });
      } catch (e) {
        wrapped = e && e.name === 'SyntaxError' && processTopLevelAwait ? processTopLevelAwait(ran) : null;
        if (!wrapped) throw e;
        columns = columnsOf(code, wrapped, true);
      }
      cellColumns = columns;
      if (script) {
        value = script.runInContext(context, { breakOnSigint: true });
      } else {
        const interrupted = new Promise(function (resolve, reject) { interruptCell = reject; });
        const out = await Promise.race([vm.runInContext(wrapped, context, { filename: filename, breakOnSigint: true }), interrupted]);
        value = out ? out.value : undefined;
      }
      if (value !== undefined) {
        context._ = value;
        send({ type: 'result', cell: cell, data: bundle(value) });
      }
    } catch (e) {
      const interrupted = isInterrupt(e);
      status = interrupted ? 'interrupted' : 'error';
      const name = interrupted ? 'Interrupted' : (e && e.name) || 'Error';
      const message = interrupted ? 'the cell was interrupted' : (e && typeof e === 'object' ? String(e.message) : String(e));
      const traceback = interrupted ? 'Interrupted: the cell was interrupted\n' : cleanStack(e, cleaned.has(e) ? null : columns);
      send({ type: 'error', cell: cell, name: name, value: message, traceback: traceback });
    } finally {
      running = false;
      interruptCell = null;
      cellColumns = null;
    }
    if (interrupted || status === 'interrupted') afterInterrupt(cell);
    send({ type: 'done', cell: cell, status: status });
  }

  process.on('SIGINT', function () {
    if (running) interrupted = true;
    if (running && interruptCell) interruptCell(new Error('Script execution was interrupted by SIGINT'));
  });
  process.on('uncaughtException', function (e) {
    send({ type: 'output', cell: current, stream: 'stderr', text: 'Uncaught ' + cleanStack(e) });
  });
  process.on('unhandledRejection', function (e) {
    send({ type: 'output', cell: current, stream: 'stderr', text: 'Unhandled rejection: ' + cleanStack(e) });
  });

  let queue = Promise.resolve();
  // net.Socket over fd 3 is node's stream for a pipe (process.stdin is one
  // too): it is read by the event loop, whereas a file stream's blocked
  // read on the thread pool would keep process.exit from finishing.
  const input = new net.Socket({ fd: 3, readable: true, writable: false });
  const rl = readline.createInterface({ input: input, crlfDelay: Infinity });
  rl.on('line', function (line) {
    const i = line.indexOf('\x1e');
    if (i < 0) return;
    let frame;
    try {
      frame = JSON.parse(line.slice(i + 1));
    } catch (e) {
      return;
    }
    if (frame.type === 'execute') {
      queue = queue.then(function () { return runCell(frame.cell || '', frame.code || ''); });
    } else if (frame.type === 'tool_result') {
      toolResult(frame);
    } else if (frame.type === 'interrupt') {
      if (running) process.kill(process.pid, 'SIGINT');
    } else if (frame.type === 'restarted') {
      // A new Berth took this kernel back: the one its pending tool()
      // calls went to is gone, and no answer will come.
      for (const [id, call] of calls) {
        calls.delete(id);
        call.reject(toolError(call, frame.error || 'Berth restarted'));
      }
    }
  });
  // Berth closed the pipe: it is gone or done with this kernel.
  rl.on('close', function () { process.exit(0); });

  send({ type: 'ready', version: VERSION, language: 'javascript', pid: process.pid, implementation: 'node ' + process.version });
});
