//! The official tools' Python runs, forked from one interpreter that has imported them.
//!
//! Importing `mlperf_logging`'s package checker, RCP checker or result summarizer imports
//! scipy, and that takes longer than most of the runs the oracle tests make, which are many.
//! So each test process starts one server, which imports the tools once and forks a child per
//! run: the child starts from the state right after those imports, which a fresh interpreter
//! reaches too, and runs the snippet (`-c`) or module (`-m`) as the interpreter would
//! (`__main__`, `sys.argv`, the working folder, the exit status; an exception's traceback on
//! stderr). Nothing a run does reaches the next one. The installed package must not change
//! while the server lives; no test changes it.
//!
//! One request per connection to the server's Unix socket: JSON (the arguments, the working
//! folder, the files for stdout and stderr), then the child's wait status, 4 bytes, when it
//! has exited. The server leaves when the test process does (its stdin closes).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;

const SERVER: &str = r#"
import json, os, runpy, select, socket, struct, sys, types
import mlperf_logging.compliance_checker.mlp_compliance
import mlperf_logging.package_checker.package_checker
import mlperf_logging.rcp_checker.rcp_checker
import mlperf_logging.result_summarizer.result_summarizer

def run(request):
    os.chdir(request['cwd'])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, request['stdout'], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, request['stderr'], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        f = os.open(path, flags, 0o600)
        os.dup2(f, fd)
        os.close(f)
    flag, target, *args = request['args']
    if flag == '-c':
        sys.argv = ['-c', *args]
        main = types.ModuleType('__main__')
        sys.modules['__main__'] = main
        exec(compile(target, '<string>', 'exec'), main.__dict__)
    elif flag == '-m':
        # What `python -m` itself calls: sys.argv[0] becomes the module's file, and a
        # traceback has the frames that a fresh interpreter's has.
        sys.argv = ['-m', *args]
        sys.path[0] = os.getcwd()
        runpy._run_module_as_main(target)
    else:
        raise SystemExit('the fork server runs `-c CODE` or `-m MODULE`, not %r' % flag)

def read_request(conn):
    data = b''
    while chunk := conn.recv(65536):
        data += chunk
    return json.loads(data)

server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
server.listen(64)
print('ready', flush=True)
waiting = {}
while True:
    readable, _, _ = select.select([server, 0], [], [], 0.01)
    if 0 in readable and not os.read(0, 1):
        break
    if server in readable:
        conn, _ = server.accept()
        request = read_request(conn)
        pid = os.fork()
        if pid == 0:
            for c in [server, conn, *waiting.values()]:
                c.close()
            # Exceptions and SystemExit end the child as they would end the interpreter, the
            # traceback without the server's own frames.
            try:
                run(request)
            except SystemExit:
                raise
            except BaseException as e:
                tb = e.__traceback__
                while tb is not None and tb.tb_frame.f_globals is globals():
                    tb = tb.tb_next
                sys.excepthook(type(e), e.with_traceback(tb), tb)
                sys.exit(1)
            sys.exit(0)
        waiting[pid] = conn
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        conn = waiting.pop(pid)
        try:
            conn.sendall(struct.pack('<i', status))
        except OSError:
            pass  # the test that asked has gone
        conn.close()
"#;

struct Server {
    socket: PathBuf,
    // Held for the life of the test process: its stdin is the server's reason to live.
    _process: Child,
    _dir: tempfile::TempDir,
}

fn server() -> &'static Server {
    static SERVER_PROCESS: OnceLock<Server> = OnceLock::new();
    SERVER_PROCESS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("sock");
        let mut process = Command::new(crate::common::python())
            .arg("-c")
            .arg(SERVER)
            .arg(&socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the Python fork server");
        let mut line = String::new();
        BufReader::new(process.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read the fork server's first line");
        assert_eq!(
            line, "ready\n",
            "the Python fork server did not start (stderr above)"
        );
        Server {
            socket,
            _process: process,
            _dir: dir,
        }
    })
}

/// Runs `python ARGS` (`-c CODE ...` or `-m MODULE ...`) in `cwd`, forked from the server:
/// what `Command::new(python).args(args).current_dir(cwd).output()` gives, stdin empty.
pub fn run(args: &[&str], cwd: &Path) -> Output {
    let files = tempfile::tempdir().expect("tempdir");
    let (stdout, stderr) = (files.path().join("stdout"), files.path().join("stderr"));
    let request = serde_json::json!({
        "args": args,
        "cwd": cwd,
        "stdout": stdout,
        "stderr": stderr,
    });
    let mut conn = UnixStream::connect(&server().socket).expect("connect to the fork server");
    conn.write_all(request.to_string().as_bytes())
        .expect("send the request");
    conn.shutdown(std::net::Shutdown::Write)
        .expect("end the request");
    let mut status = [0u8; 4];
    conn.read_exact(&mut status)
        .expect("the fork server answers with the run's wait status");
    Output {
        status: ExitStatus::from_raw(i32::from_le_bytes(status)),
        stdout: std::fs::read(&stdout).unwrap_or_default(),
        stderr: std::fs::read(&stderr).unwrap_or_default(),
    }
}
