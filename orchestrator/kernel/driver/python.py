# Berth's Python kernel driver. Berth embeds this file and feeds it to the
# interpreter through a loader given with -c, so no file is left behind. It
# speaks the bridge protocol (see package bridge): frames on a private copy
# of the original stdout, commands from a private copy of the original
# stdin. User code gets fd 1 and 2 pointed at a capture pipe and stdin at
# /dev/null, so nothing it or its children write can corrupt a frame.
# Written for Python 3.8 and later; it imports nothing outside the standard
# library.
import array
import ast
import base64
import builtins
import codecs
import fcntl
import importlib
import importlib.util
import io
import json
import linecache
import os
import queue
import re
import select
import shlex
import signal
import subprocess
import sys
import termios
import threading
import time
import timeit
import tokenize
import traceback
import types
import faulthandler

VERSION = 1
DRIVER_FILE = "<berth-driver>"
TABLE_ROWS = int(os.environ.get("BERTH_TABLE_ROWS", "50"))
TABLE_COLS = int(os.environ.get("BERTH_TABLE_COLS", "30"))
TABLE_CELL = 200

# --- the channel: private copies of the original stdin and stdout --------
_kernel_pid = os.getpid()
_frames_out = os.dup(1)
_frames_in = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
_orig_err = os.dup(2)
_devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(_devnull, 0)
os.close(_devnull)
# A crash (segfault) reports on the original stderr, which Berth reads.
_crash_log = os.fdopen(_orig_err, "w")
faulthandler.enable(file=_crash_log, all_threads=False)

# Bounded, so a cell that prints faster than Berth reads waits for it
# (as a write to a full pipe would) instead of piling its output up here.
_outq = queue.Queue(maxsize=64)


def send(**frame):
    """Queue a frame; one writer thread writes them, so a KeyboardInterrupt
    in the main thread can never cut a frame in half. A forked child
    (multiprocessing) has no writer thread: what it prints reaches the
    capture pipe, but its frames (a display) are dropped rather than left
    to fill a queue nobody empties."""
    if os.getpid() != _kernel_pid:
        return
    _outq.put(b"\x1e" + json.dumps(frame, separators=(",", ":")).encode() + b"\n")


def _writer():
    while True:
        data = _outq.get()
        if isinstance(data, threading.Event):
            data.set()
            continue
        view = memoryview(data)
        while view:
            n = os.write(_frames_out, view)
            view = view[n:]


# --- capture of fd 1 and 2 -------------------------------------------------
_cell = {"id": "", "running": False, "interrupted": False, "since": 0.0}
_capture_lock = threading.Lock()
# A drain takes the turnstile before the capture lock, and the pump passes
# through it before each chunk: a pump kept busy by a flood lets it in.
_turnstile = threading.Lock()
_capture_fd = [-1]
_decoder = codecs.getincrementaldecoder("utf-8")("replace")


def _capture():
    """Point fd 1 and 2 at one pipe, as a terminal does with 2>&1, so
    what user code and its children write keeps its order. A pump thread
    sends what arrives while a cell runs; _drain sends the rest."""
    r, w = os.pipe()
    os.dup2(w, 1)
    os.dup2(w, 2)
    os.close(w)
    os.set_blocking(r, False)
    _capture_fd[0] = r

    def pump():
        poller = select.poll()
        poller.register(r, select.POLLIN)
        while True:
            poller.poll()
            with _turnstile:
                pass
            if not _read_capture(1 << 16):
                return

    threading.Thread(target=pump, daemon=True).start()


def _read_capture(limit=None):
    """Send up to limit bytes from the capture pipe, or (None) the bytes it
    holds now; False once it has no writer. Reading and sending happen
    under one lock, so when a drain holds it no byte can be read but not
    yet sent; and a drain reads only what is there, so a process left
    flooding the pipe cannot keep it going."""
    with _capture_lock:
        fd = _capture_fd[0]
        if limit is None:
            limit = _held(fd)
        while limit > 0:
            try:
                chunk = os.read(fd, min(limit, 1 << 16))
            except BlockingIOError:
                return True
            if not chunk:
                return False
            limit -= len(chunk)
            text = _decoder.decode(chunk)
            if text:
                send(type="output", cell=_cell["id"], stream="stdout", text=text)
        return True


def _held(fd):
    """How many bytes the pipe holds (FIONREAD)."""
    n = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, n)
    return n[0]


def _drain():
    """Return once everything written to fd 1 and 2 so far was sent: a
    write to a pipe is in it when write returns, so reading what the pipe
    holds now is enough."""
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass
    with _turnstile:
        _read_capture()


_real_exit = os._exit


def _exit(status):
    """os._exit, after sending what the cell printed so far: the process
    ends at once, and its last words should not die with it. A forked
    child (multiprocessing) has no pump threads, so it just exits."""
    if os.getpid() != _kernel_pid:
        _real_exit(status)
    try:
        _drain()
        flushed = threading.Event()
        _outq.put(flushed, timeout=5)
        flushed.wait(5)
    finally:
        _real_exit(status)


# --- tool() re-entry -------------------------------------------------------
class ToolError(Exception):
    """Raised by tool() when the harness refuses or the tool fails."""


_calls = {}
_calls_lock = threading.Lock()
_call_seq = [0]


def tool(name, arguments=None):
    """Call one of the harness's tools; returns its text (or its content
    blocks when it returned more than text); raises ToolError on a refusal
    or a failed tool."""
    if not isinstance(name, str) or not name:
        raise TypeError("tool(name, arguments): name must be a tool name string")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise TypeError("tool(name, arguments): arguments must be a dict of the tool's named arguments")
    json.dumps(arguments)  # raise TypeError here, not in the writer thread
    if not _cell["running"]:
        # A thread a cell left behind, between cells: no cell would ever
        # await this call, and nothing would read it until the next cell.
        raise ToolError("%s: the call was abandoned: the cell that made it had ended; await tool() within its cell" % name)
    slot = {"event": threading.Event()}
    with _calls_lock:
        _call_seq[0] += 1
        cid = str(_call_seq[0])
        _calls[cid] = slot
    try:
        send(type="tool_call", cell=_cell["id"], id=cid, name=name, arguments=arguments)
        slot["event"].wait()
    finally:
        with _calls_lock:
            _calls.pop(cid, None)
    frame = slot["frame"]
    if frame.get("error"):
        raise ToolError("%s: %s" % (name, frame["error"]))
    result = frame.get("result") or {}
    content = result.get("content") or []
    texts = [b.get("text", "") for b in content if b.get("type") == "text"]
    if result.get("isError"):
        raise ToolError("%s: %s" % (name, "\n".join(texts) or "failed"))
    if len(texts) == len(content):
        return "\n".join(texts)
    return content


# --- rich display ----------------------------------------------------------
_REPRS = (
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_json_", "application/json"),
    ("_repr_html_", "text/html"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_latex_", "text/latex"),
)


_BARE_REPR = re.compile(r"^<[\w.]+ object( at 0x[0-9a-fA-F]+)?>$")


TEXT_LIMIT = 1 << 20


def _cap(s):
    """Bound one text form (Berth caps it again, smaller): a repr of a huge
    object should not become a huge frame."""
    if len(s) <= TEXT_LIMIT:
        return s
    half = TEXT_LIMIT // 2
    return s[:half] + "\n… [%d characters cut] …\n" % (len(s) - TEXT_LIMIT) + s[-half:]


def _cell_text(v):
    s = str(v)
    return s if len(s) <= TABLE_CELL else s[: TABLE_CELL - 1] + "…"


def _table(obj):
    pd = sys.modules.get("pandas")
    if pd is None:
        return None
    if isinstance(obj, pd.Series):
        obj = obj.to_frame(name=obj.name if obj.name is not None else 0)
    elif not isinstance(obj, pd.DataFrame):
        return None
    nrows, ncols = obj.shape
    show_index = not isinstance(obj.index, pd.RangeIndex) or obj.index.name is not None
    cols = [str(c) for c in obj.columns[:TABLE_COLS]]
    if show_index:
        cols = [str(obj.index.name) if obj.index.name is not None else ""] + cols
    part = obj.iloc[:TABLE_ROWS, :TABLE_COLS]
    rows = []
    for idx, values in zip(part.index, part.itertuples(index=False, name=None)):
        row = [_cell_text(v) for v in values]
        rows.append(([_cell_text(idx)] if show_index else []) + row)
    return {
        "columns": cols,
        "rows": rows,
        "truncated": nrows > TABLE_ROWS or ncols > TABLE_COLS,
        "shape": [nrows, ncols],
    }


def _figure_png(obj):
    if not type(obj).__module__.startswith("matplotlib.figure") or not hasattr(obj, "savefig"):
        return None
    buf = io.BytesIO()
    obj.savefig(buf, format="png", bbox_inches="tight")
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close(obj)  # shown now, so not again at the end of the cell
    return base64.b64encode(buf.getvalue()).decode("ascii")


def bundle(obj):
    """The MIME bundle of obj, as a notebook front end would get it."""
    try:
        table = _table(obj)
    except Exception:
        table = None  # the text form below is the fallback
    if table is not None:
        return {"application/vnd.berth.table+json": table, "text/plain": _cap(repr(obj))}
    png = _figure_png(obj)
    if png is not None:
        return {"image/png": png}
    data = {}
    for meth, mime in _REPRS:
        f = getattr(obj, meth, None)
        if f is None or isinstance(obj, type):
            continue
        try:
            v = f()
        except Exception:
            continue
        if v is None:
            continue
        if isinstance(v, tuple):
            v = v[0]
        if mime in ("image/png", "image/jpeg") and isinstance(v, (bytes, bytearray)):
            v = base64.b64encode(v).decode("ascii")
        try:
            json.dumps(v)
        except TypeError:
            v = str(v)
        data[mime] = _cap(v) if isinstance(v, str) and not mime.startswith("image/") else v
    plain = _cap(repr(obj))
    # A repr that only names the type says less than any rich form.
    if not data or not _BARE_REPR.match(plain):
        data["text/plain"] = plain
    return data


def display(*objs, raw=False):
    """Show objects in the cell's result: images, tables, HTML, Markdown,
    JSON or text. raw=True takes each object as a ready MIME bundle."""
    for obj in objs:
        send(type="display", cell=_cell["id"], data=obj if raw else bundle(obj))


class _IPythonDisplay:
    """An import hook: IPython's own display() prints a bare repr outside
    an IPython shell, so when a cell imports IPython.display, its display
    becomes the driver's and HTML(), Markdown(), Image() show as they
    would in a notebook."""

    NAMES = ("IPython.core.display_functions", "IPython.core.display")

    def find_spec(self, name, path=None, target=None):
        if name not in self.NAMES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                load = spec.loader.exec_module

                def exec_module(module, load=load):
                    load(module)
                    module.display = display

                spec.loader.exec_module = exec_module
                return spec
        return None


# --- IPython.display without IPython ----------------------------------------
# Where the interpreter has no IPython, a cell's own imports of
# IPython.display get a stand-in with the names eval supports. The cell's
# code is rewritten to import it under a private name, so IPython never
# enters sys.modules and "import IPython" still fails: pandas, matplotlib
# and tqdm.auto, which look for IPython there, act as they do without it.
# Modules imported from files are not rewritten.
_STANDIN = "__berth_ipython_display__"
_STANDIN_PKG = "__berth_ipython__"
_STANDIN_NAMES = ("display", "Markdown", "HTML", "Image")
_DISPLAY_MODULES = ("IPython.display", "IPython.core.display", "IPython.core.display_functions")


def _read_source(data, url, filename, binary):
    """What IPython's display objects read: data as given, or a file's
    contents, or a URL's."""
    if filename is not None:
        with open(filename, "rb" if binary else "r") as f:
            return f.read()
    if url is not None:
        import urllib.request
        with urllib.request.urlopen(url) as r:
            body = r.read()
        return body if binary else body.decode("utf-8", "replace")
    return data


def _text_source(data, url, filename):
    """IPython's rule: a str that names a URL or an existing file is one."""
    if isinstance(data, os.PathLike):
        data = os.fspath(data)
    if isinstance(data, str) and url is None and filename is None:
        if data.startswith(("http://", "https://")):
            return None, data, None
        try:
            if os.path.isfile(data):
                return None, None, data
        except (OSError, ValueError):
            pass
    return data, url, filename


class _TextDisplay:
    _kind = ""

    def __init__(self, data=None, url=None, filename=None, metadata=None):
        data, url, filename = _text_source(data, url, filename)
        self.data = _read_source(data, url, filename, False)
        self.url, self.filename, self.metadata = url, filename, metadata

    def __repr__(self):
        return "<IPython.display.%s object>" % type(self).__name__


class HTML(_TextDisplay):
    """IPython.display.HTML: shown as HTML."""

    def _repr_html_(self):
        return self.data

    __html__ = _repr_html_


class Markdown(_TextDisplay):
    """IPython.display.Markdown: shown as Markdown."""

    def _repr_markdown_(self):
        return self.data


_IMAGE_MAGIC = ((b"\x89PNG\r\n\x1a\n", "png"), (b"\xff\xd8", "jpeg"), (b"GIF8", "gif"), (b"RIFF", "webp"))


class Image:
    """IPython.display.Image: PNG and JPEG data (bytes, a file, a URL) are
    shown as images; a URL not embedded, and other formats, as HTML."""

    def __init__(self, data=None, url=None, filename=None, format=None, embed=None,
                 width=None, height=None, retina=False, unconfined=False, metadata=None, alt=None):
        if isinstance(data, (bytes, bytearray)):
            data = bytes(data)
        else:
            data, url, filename = _text_source(data, url, filename)
        if embed is None:
            embed = url is None
        self.url, self.filename, self.embed = url, filename, embed
        self.width, self.height, self.alt, self.metadata = width, height, alt, metadata
        self.data = _read_source(data, url, filename, True) if embed else None
        if isinstance(self.data, str):
            self.data = self.data.encode("latin-1")
        if format is None:
            name = (filename or url or "").lower().rsplit(".", 1)[-1]
            format = {"jpg": "jpeg", "jpeg": "jpeg", "png": "png", "gif": "gif", "webp": "webp"}.get(name)
        if format is None and self.data:
            format = next((f for magic, f in _IMAGE_MAGIC if self.data.startswith(magic)), "png")
        self.format = (format or "png").lower().replace("jpg", "jpeg")

    def _repr_png_(self):
        return self.data if self.embed and self.format == "png" else None

    def _repr_jpeg_(self):
        return self.data if self.embed and self.format == "jpeg" else None

    def _repr_html_(self):
        if self.embed and self.format in ("png", "jpeg"):
            return None
        src = self.url
        if self.embed:
            src = "data:image/%s;base64,%s" % (self.format, base64.b64encode(self.data or b"").decode("ascii"))
        size = "".join(' %s="%s"' % (k, v) for k, v in (("width", self.width), ("height", self.height), ("alt", self.alt)) if v is not None)
        return '<img src="%s"%s/>' % (src, size)

    def __repr__(self):
        return "<IPython.display.Image object>"


def _standin_display(*objs, raw=False, **kwargs):
    """IPython.display.display: objects shown in the cell's result; its
    other arguments (include, exclude, metadata, display_id, ...) are
    accepted and have no effect here."""
    display(*objs, raw=raw)


def _standin_getattr(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise ImportError(
        "cannot import name %r from IPython.display: IPython is not installed in this interpreter (%s), "
        "and eval's stand-in provides only %s. Show other objects with display(), or install IPython "
        "into the kernel's environment." % (name, sys.executable, ", ".join(_STANDIN_NAMES)), name=name)


def _make_standin():
    mod = types.ModuleType(_STANDIN, "eval's stand-in for IPython.display, where IPython is not installed: %s."
                           % ", ".join(_STANDIN_NAMES))
    for cls in (HTML, Markdown, Image):
        cls.__module__ = "IPython.display"
    _standin_display.__name__ = "display"
    mod.display, mod.HTML, mod.Markdown, mod.Image = _standin_display, HTML, Markdown, Image
    mod.__all__ = list(_STANDIN_NAMES)
    mod.__getattr__ = _standin_getattr
    pkg = types.ModuleType(_STANDIN_PKG, "eval's stand-in for the IPython package, bound only by \"import IPython.display\".")
    pkg.display = mod
    sys.modules[_STANDIN] = mod
    sys.modules[_STANDIN_PKG] = pkg


class _StandinImports(ast.NodeTransformer):
    """Points a cell's imports of IPython.display at the stand-in."""

    def visit_ImportFrom(self, node):
        if node.level:
            return node
        if node.module in _DISPLAY_MODULES:
            return ast.copy_location(ast.ImportFrom(module=_STANDIN, names=node.names, level=0), node)
        if node.module == "IPython" and all(a.name == "display" for a in node.names):
            # from IPython import display: the module.
            return ast.copy_location(ast.Import(names=[ast.alias(name=_STANDIN, asname=a.asname or "display") for a in node.names]), node)
        return node

    def visit_Import(self, node):
        names = []
        for a in node.names:
            if a.name in _DISPLAY_MODULES and a.asname:
                a = ast.alias(name=_STANDIN, asname=a.asname)
            elif a.name == "IPython.display":
                a = ast.alias(name=_STANDIN_PKG, asname="IPython")
            names.append(a)
        node.names = names
        return node


def _imports_ipython_display(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (
                node.module in _DISPLAY_MODULES or node.module == "IPython"):
            return True
        if isinstance(node, ast.Import) and any(a.name in _DISPLAY_MODULES for a in node.names):
            return True
    return False


def _standin_imports(tree):
    """The cell's tree with its IPython.display imports pointed at the
    stand-in, when this interpreter has no IPython; else as it was."""
    if not _imports_ipython_display(tree):
        return tree
    if "IPython" in sys.modules or importlib.util.find_spec("IPython") is not None:
        return tree
    if _STANDIN not in sys.modules:
        _make_standin()
    return ast.fix_missing_locations(_StandinImports().visit(tree))


def _figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        for num in plt.get_fignums():
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png", bbox_inches="tight")
            send(type="display", cell=_cell["id"],
                 data={"image/png": base64.b64encode(buf.getvalue()).decode("ascii")})
    except Exception as e:
        send(type="output", cell=_cell["id"], stream="stderr", text="figure could not be rendered: %r\n" % (e,))
    finally:
        plt.close("all")


# --- IPython idioms --------------------------------------------------------
_SUPPORTED = "%pip (and !pip), %cd, %timeit, %%timeit, %%bash, %%sh, %%script, %matplotlib, !cmd and x = !cmd"
_ASSIGN_SHELL = re.compile(r"^(\s*)([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*!(.*)$")
_LINE_MAGIC = re.compile(r"^(\s*)%([A-Za-z_]\w*)(.*)$")
_SHELL = re.compile(r"^(\s*)!(.*)$")
_PIP = re.compile(r"^pip3?\s+")
_EXPAND = re.compile(r"\{([^{}\n]+)\}|(?<!\$)\$([A-Za-z_]\w*)")
_TIMEIT_OPT = re.compile(r"^\s*-([nr])\s*(\d+)")


def _statement_rows(masked):
    """Rows (1-based) where a new statement starts, found with tokenize, so
    a line inside a string literal or a bracket is never taken for a magic."""
    rows = {1}
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(masked).readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth = max(0, depth - 1)
            elif tok.type in (tokenize.NEWLINE, tokenize.NL) and depth == 0:
                rows.add(tok.end[0] + 1)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return rows


def rewrite(src):
    """Rewrite IPython idioms into plain Python calling the driver's
    helpers; code that is not an idiom is left exactly as it was."""
    lines = src.split("\n")
    first = next((i for i, l in enumerate(lines) if l.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        head = lines[first].strip()[2:]
        name, _, args = head.partition(" ")
        body = "\n".join(lines[first + 1:])
        if name in ("bash", "sh", "script"):
            shell = "/bin/sh" if name == "sh" else "/bin/bash"
            if name == "script":
                shell = args.strip() or "/bin/sh"
            return "__berth__.sh(%r, %r, expand=False)" % (body, shell)
        if name == "timeit":
            return "__berth__.timeit(%r, %r)" % (args, body)
        return "__berth__.unsupported(%r)" % ("%%" + name,)
    candidates = {}
    masked = list(lines)
    for i, line in enumerate(lines):
        m = _ASSIGN_SHELL.match(line)
        if m:
            candidates[i] = "%s%s = __berth__.getoutput(%r)" % (m.group(1), m.group(2), m.group(3).strip())
        elif _SHELL.match(line):
            m = _SHELL.match(line)
            cmd = m.group(2).strip()
            if _PIP.match(cmd):
                # The pip on PATH may belong to another environment: install
                # into the kernel's own, as %pip does.
                candidates[i] = "%s__berth__.pip(%r)" % (m.group(1), _PIP.sub("", cmd, count=1))
            else:
                candidates[i] = "%s__berth__.sh(%r)" % (m.group(1), cmd)
        else:
            m = _LINE_MAGIC.match(line)
            if not m:
                continue
            indent, name, args = m.group(1), m.group(2), m.group(3).strip()
            call = {
                "pip": "__berth__.pip(%r)" % (args,),
                "cd": "__berth__.cd(%r)" % (args,),
                "timeit": "__berth__.timeit(%r, None)" % (args,),
                "matplotlib": "None",
            }.get(name, "__berth__.unsupported(%r)" % ("%" + name,))
            candidates[i] = indent + call
        masked[i] = re.match(r"\s*", line).group(0) + "pass"
    if not candidates:
        return src
    starts = _statement_rows("\n".join(masked))
    for i, repl in candidates.items():
        if i + 1 in starts:
            lines[i] = repl
    return "\n".join(lines)


class _Helpers:
    """What rewritten idioms call; bound in the namespace as __berth__."""

    def __init__(self, ns):
        self.ns = ns

    def expand(self, cmd):
        """IPython's expansion in !cmd: {expr} and $name take their values
        from the namespace; what does not evaluate (awk's {print $1}, a
        shell's own $HOME) is left for the shell."""

        def value(m):
            if m.group(1) is not None:
                try:
                    return str(eval(m.group(1), self.ns))
                except Exception:
                    return m.group(0)
            name = m.group(2)
            return str(self.ns[name]) if name in self.ns else m.group(0)

        return _EXPAND.sub(value, cmd)

    def sh(self, cmd, shell="/bin/sh", expand=True):
        """!cmd (expanded) and %%bash, %%sh, %%script (the body as typed)."""
        r = subprocess.run([shell, "-c", self.expand(cmd) if expand else cmd], stdin=subprocess.DEVNULL)
        if r.returncode:
            print("(exit status %d)" % r.returncode, file=sys.stderr)

    def getoutput(self, cmd):
        r = subprocess.run(["/bin/sh", "-c", self.expand(cmd)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return r.stdout.decode("utf-8", "replace").splitlines()

    def cd(self, path):
        path = os.path.expanduser(path.strip().strip("'\"") or "~")
        os.chdir(path)
        print(os.getcwd())

    def pip(self, args):
        if importlib.util.find_spec("pip") is None:
            raise RuntimeError(
                "pip is not installed for this kernel's interpreter (%s), so %%pip cannot install anything. "
                "Install the package another way: in the container's image, or with the system's package manager "
                "(Debian: !apt-get install -y python3-NAME, as root); or create a .venv with pip in the working "
                "directory, which eval then uses (reset the kernel to switch)." % sys.executable)
        r = subprocess.run([sys.executable, "-m", "pip"] + shlex.split(args), stdin=subprocess.DEVNULL)
        # Forget what was imported since the kernel started, so the next
        # import finds what pip just installed or upgraded.
        for name in list(sys.modules):
            if name not in _initial_modules:
                del sys.modules[name]
        importlib.invalidate_caches()
        if r.returncode:
            print("(pip exited with status %d)" % r.returncode, file=sys.stderr)
        else:
            print("Modules imported since the kernel started were dropped; import them again.")

    def timeit(self, args, body):
        # Options (-n loops, -r runs) lead; the rest is code, kept as typed.
        number, repeat = 0, 7
        m = _TIMEIT_OPT.match(args)
        while m:
            if m.group(1) == "n":
                number = int(m.group(2))
            else:
                repeat = int(m.group(2))
            args = args[m.end():]
            m = _TIMEIT_OPT.match(args)
        if body is None:  # %timeit: the statement is on the line
            setup, stmt = "pass", args.strip()
        else:  # %%timeit: the line is setup, the body is timed
            setup, stmt = args.strip() or "pass", body
        timer = timeit.Timer(stmt, setup, globals=self.ns)
        if number == 0:
            number, _ = timer.autorange()
        times = [t / number for t in timer.repeat(repeat=repeat, number=number)]
        mean = sum(times) / len(times)
        std = (sum((t - mean) ** 2 for t in times) / len(times)) ** 0.5
        print("%s ± %s per loop (mean ± std. dev. of %d runs, %d loops each)"
              % (_fmt_time(mean), _fmt_time(std), repeat, number))

    def unsupported(self, name):
        raise NotImplementedError("IPython magic %s is not supported by this kernel; supported: %s. "
                                  "Write plain Python instead." % (name, _SUPPORTED))


def _fmt_time(t):
    for unit, scale in (("s", 1), ("ms", 1e3), ("µs", 1e6), ("ns", 1e9)):
        if t * scale >= 1:
            return "%.3g %s" % (t * scale, unit)
    return "%.3g ns" % (t * 1e9)


# --- what an interrupted cell started ---------------------------------------
# An interrupt reaches the kernel's whole process group, but a process may
# ignore it (a shell's background job does), catch it, or have left the
# group (setsid). A kernel reported "intact" after an interrupt must not
# leave such processes holding the container's pid limit, so the driver
# ends what the interrupted cell started before it says done.
_HZ = os.sysconf("SC_CLK_TCK")
_RELAY = "berth-relay"


def _proc_table():
    """Every process as {pid: (state, ppid, pgrp, start)}, start in clock
    ticks since boot; processes that end while it is read are left out."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        f = stat[stat.rfind(b")") + 2:].split()
        try:
            table[int(name)] = (f[0], int(f[1]), int(f[2]), int(f[19]))
        except (IndexError, ValueError):
            continue
    return table


def _under_relay():
    """Whether the kernel's parent is Berth's relay, which starts nothing
    but the kernel and adopts every orphan of its tree (a subreaper):
    then all its descendants but the kernel are the kernel's doing."""
    try:
        with open("/proc/%d/comm" % os.getppid()) as f:
            comm = f.read().strip()
    except OSError:
        return False
    return comm == _RELAY


def _strays(table, since, root):
    """The live processes, other than the kernel and its parent, started
    at or after since (ticks) that are in the kernel's group or
    descend from root."""
    me, group = os.getpid(), os.getpgrp()
    children = {}
    for pid, (_, ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in tree:
                tree.add(c)
                todo.append(c)
    return [pid for pid, (state, _, pgrp, start) in table.items()
            if pid not in (me, os.getppid()) and state not in (b"Z", b"X")
            and start >= since and (pgrp == group or pid in tree)]


def _end_strays(started):
    """End every process the cell started (started: CLOCK_BOOTTIME at its
    start) that is still running, and reap those that were the kernel's
    own children. Under the relay that is every process of the kernel's
    tree, those that left its group or session included; without it, the
    kernel's group and descendants (a process that left the group and
    whose parent is gone is out of reach). Processes of earlier cells are
    left running; start times count in clock ticks, so one started in the
    tick (10 ms) before the cell began counts as the cell's. Kills repeat
    until a pass finds none, since a process may fork while being killed.
    Returns how many were ended and which could not be."""
    since = int(started * _HZ)
    root = os.getppid() if _under_relay() else os.getpid()
    ended, left = set(), []
    deadline = time.monotonic() + 3
    while True:
        left = _strays(_proc_table(), since, root)
        if not left or time.monotonic() > deadline:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                ended.add(pid)
            except OSError:
                pass
        time.sleep(0.005)
    _reap(ended)
    return len(ended), left


def _reap(pids):
    """Reap the killed processes that were the kernel's children (the
    relay reaps the rest), so no zombie holds a pid; a Popen or
    multiprocessing object that owned one learns it was killed."""
    reaped = set()
    deadline = time.monotonic() + 1
    mine = [pid for pid, (_, ppid, _, _) in _proc_table().items() if pid in pids and ppid == os.getpid()]
    while mine and time.monotonic() < deadline:
        for pid in list(mine):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                reaped.add(pid)
                mine.remove(pid)
        if mine:
            time.sleep(0.005)
    if not reaped:
        return
    import gc
    for obj in gc.get_objects():
        if isinstance(obj, subprocess.Popen) or type(obj).__module__.startswith("multiprocessing.popen_"):
            if getattr(obj, "pid", None) in reaped and getattr(obj, "returncode", 0) is None:
                obj.returncode = -signal.SIGKILL


# --- cells -----------------------------------------------------------------
# One namespace for the kernel's life, as the __main__ module, so pickling
# and multiprocessing find what cells define.
_main = types.ModuleType("__main__")
sys.modules["__main__"] = _main
_ns = _main.__dict__
_ns.update(__builtins__=builtins, display=display, tool=tool, ToolError=ToolError, __berth__=_Helpers(_ns))


def _on_sigint(signum, frame):
    if _cell["running"]:
        _cell["interrupted"] = True
        raise KeyboardInterrupt
    # Between cells an interrupt has nothing to stop.


def _format_error(e):
    te = traceback.TracebackException(type(e), e, e.__traceback__, compact=True) \
        if sys.version_info >= (3, 10) else traceback.TracebackException(type(e), e, e.__traceback__)
    seen = set()
    stack = [te]
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        t.stack = traceback.StackSummary.from_list([f for f in t.stack if f.filename != DRIVER_FILE])
        for nxt in (t.__cause__, t.__context__):
            if nxt is not None:
                stack.append(nxt)
    return "".join(te.format())


def _compile(src, cell):
    filename = "<cell-%s>" % cell
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    tree = ast.parse(src, filename, "exec")
    if "IPython" in src:
        tree = _standin_imports(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not src.rstrip().endswith(";"):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, filename, "exec")
    return body, (compile(last, filename, "eval") if last is not None else None)


def run_cell(cell, code):
    _cell["id"] = cell
    _cell["interrupted"] = False
    status = "ok"
    try:
        try:
            body, last = _compile(rewrite(code), cell)
            _cell["since"] = time.clock_gettime(time.CLOCK_BOOTTIME)
            _cell["running"] = True
            exec(body, _ns)
            value = eval(last, _ns) if last is not None else None
            if value is not None:
                _ns["_"] = value
                send(type="result", cell=cell, data=bundle(value))
        finally:
            _cell["running"] = False
    except BaseException as e:
        status = "interrupted" if isinstance(e, KeyboardInterrupt) else "error"
        send(type="error", cell=cell, name=type(e).__name__, value=str(e), traceback=_format_error(e))
    if os.getpid() != _kernel_pid:
        # A process the cell forked (os.fork) came to the cell's end: it
        # is not the kernel, and has no loop of its own to go back to.
        _real_exit(0 if status == "ok" else 1)
    if _cell["interrupted"] or status == "interrupted":
        _after_interrupt(cell)
    _figures()
    _drain()
    send(type="done", cell=cell, status=status)


def _after_interrupt(cell):
    """End what the interrupted cell started, and say so in its output."""
    try:
        n, left = _end_strays(_cell["since"])
    except Exception as e:
        send(type="output", cell=cell, stream="stderr",
             text="berth: the processes the interrupted cell started could not be listed (%r); some may still run\n" % (e,))
        return
    if n:
        send(type="output", cell=cell, stream="stderr",
             text="berth: ended %d processes the interrupted cell had started and left running\n" % n)
    if left:
        send(type="output", cell=cell, stream="stderr",
             text="berth: %d processes the interrupted cell started could not be ended: pids %s\n"
             % (len(left), " ".join(map(str, sorted(left)))))


# --- commands from Berth ---------------------------------------------------
_cells = queue.Queue()


def _reader():
    for line in _frames_in:
        i = line.find(b"\x1e")
        if i < 0:
            continue
        try:
            frame = json.loads(line[i + 1:])
        except ValueError:
            continue
        kind = frame.get("type")
        if kind == "execute":
            _cells.put(frame)
        elif kind == "tool_result":
            with _calls_lock:
                slot = _calls.get(frame.get("id"))
            if slot is not None:
                slot["frame"] = frame
                slot["event"].set()
        elif kind == "interrupt":
            if _cell["running"]:
                os.kill(os.getpid(), signal.SIGINT)
        elif kind == "restarted":
            # A new Berth took this kernel back: the one its pending
            # tool() calls went to is gone, and no answer will come.
            with _calls_lock:
                slots = list(_calls.values())
            for slot in slots:
                slot["frame"] = {"error": frame.get("error") or "Berth restarted"}
                slot["event"].set()
    # Berth closed the pipe: it is gone or done with this kernel.
    _real_exit(0)


def main():
    import warnings
    warnings.filterwarnings("ignore", message=".*non-interactive.*")
    signal.signal(signal.SIGINT, _on_sigint)
    threading.Thread(target=_writer, daemon=True).start()
    _capture()
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", 0, closefd=False), encoding="utf-8",
                                  errors="backslashreplace", write_through=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", 0, closefd=False), encoding="utf-8",
                                  errors="backslashreplace", write_through=True)
    sys.stdin = open(os.devnull)
    sys.argv = [""]
    sys.meta_path.insert(0, _IPythonDisplay())
    os._exit = _exit
    threading.Thread(target=_reader, daemon=True).start()
    impl = "%s %s" % (sys.implementation.name, ".".join(map(str, sys.version_info[:3])))
    send(type="ready", version=VERSION, language="python", pid=os.getpid(), implementation=impl)
    while True:
        frame = _cells.get()
        run_cell(frame.get("cell", ""), frame.get("code", ""))


_initial_modules = set(sys.modules)
main()
