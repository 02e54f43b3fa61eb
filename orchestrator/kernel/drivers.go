package kernel

import (
	_ "embed"
	"fmt"
	"strconv"
)

// The drivers travel inside the binary. Each interpreter gets a one-line
// loader on its command line that reads exactly the driver's length from
// stdin and runs it, so the driver never exists as a file and the frames
// that follow on stdin are left for it.
var (
	//go:embed driver/python.py
	pythonDriver string
	//go:embed driver/node.js
	nodeDriver string
)

// Languages eval accepts.
const (
	Python     = "python"
	JavaScript = "javascript"
)

const pythonLoader = "import os,sys\n" +
	"n=int(sys.argv[1]);b=b''\n" +
	"while len(b)<n:\n" +
	" c=os.read(0,n-len(b))\n" +
	" if not c:sys.exit('berth: the kernel driver was cut short')\n" +
	" b+=c\n" +
	"exec(compile(b,'<berth-driver>','exec'),{'__name__':'berth_driver'})"

// nodeLoader reads the driver from fd 3, where the shell below moved the
// frame pipe.
const nodeLoader = "const fs=require('fs');const n=+process.argv[1];const b=Buffer.alloc(n);let o=0;" +
	"while(o<n){let k=0;try{k=fs.readSync(3,b,o,n-o,null)}catch(e){if(e.code==='EAGAIN')continue;throw e}" +
	"if(!k){console.error('berth: the kernel driver was cut short');process.exit(70)}o+=k}" +
	"require('vm').runInThisContext(b.toString(),{filename:'<berth-driver>'})(require)"

// nodeShell starts node with the frame pipe moved from stdin to fd 3 and
// stdin on /dev/null. Node cannot repoint its own descriptors as the
// Python driver does, and a child started with stdio "inherit" would
// otherwise read Berth's frames. The shell runs in the enclosure beside
// node, so the frames still travel over the process's own stdin and
// stdout, the pipes a container exec gives (the enclosure needs /bin/sh).
// exec keeps the process id.
const nodeShell = `exec "$0" --expose-internals -e "$1" "$2" 3<&0 </dev/null`

// launch is how one language's kernel is started: the executable, its
// arguments, and the driver source to write to its stdin first.
type launch struct {
	path   string
	args   []string
	source string
}

// launchFor builds the launch of lang's driver on the interpreter interp.
func launchFor(lang, interp string) (launch, error) {
	switch lang {
	case Python:
		// -u: no buffering between the driver's writes and the pipe.
		return launch{path: interp, args: []string{"-u", "-c", pythonLoader, strconv.Itoa(len(pythonDriver))}, source: pythonDriver}, nil
	case JavaScript:
		// --expose-internals gives the driver node's own rewriter for
		// top-level await (the one the REPL uses).
		return launch{path: "/bin/sh", args: []string{"-c", nodeShell, interp, nodeLoader, strconv.Itoa(len(nodeDriver))}, source: nodeDriver}, nil
	}
	return launch{}, fmt.Errorf("unknown language %q: use \"python\" or \"javascript\"", lang)
}
