//! The driver's handle on a child process hosting one side: spawn it with a
//! [`SideSpec`], send [`Command`]s, read [`ChildReport`]s.
//!
//! Invariant: every call either returns the child's next report or an error that
//! names the side and what the child did (exit status, bad line).

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command as Proc, Stdio};

use anyhow::{bail, Context, Result};

use crate::spec::{ChildReport, Command, SideSpec};

/// A running child.
pub struct ChildProc {
    label: String,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl ChildProc {
    /// Starts a child for `spec` and waits for its sync report.
    pub fn spawn(spec: &SideSpec) -> Result<(Self, ChildReport)> {
        let exe = std::env::current_exe().context("locating the bench executable")?;
        let label = spec.side.label().to_string();
        let mut child = Proc::new(&exe)
            .arg("child")
            .arg(serde_json::to_string(spec)?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("spawning {} for the {label} side", exe.display()))?;
        let stdin = child.stdin.take().context("child stdin")?;
        let stdout = child.stdout.take().context("child stdout")?;
        let mut c = ChildProc {
            label,
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
        };
        let r = c.read()?;
        Ok((c, r))
    }

    fn read(&mut self) -> Result<ChildReport> {
        match self.lines.next() {
            Some(Ok(line)) => serde_json::from_str(&line)
                .with_context(|| format!("{} side: bad report line {line:?}", self.label)),
            Some(Err(e)) => Err(e).with_context(|| format!("{} side: reading stdout", self.label)),
            None => {
                let status = self.child.wait().ok();
                bail!(
                    "{} side: child exited before reporting ({status:?}); see its stderr above",
                    self.label
                )
            }
        }
    }

    /// Sends one command and returns the child's report.
    pub fn cmd(&mut self, c: &Command) -> Result<ChildReport> {
        let line = serde_json::to_string(c)?;
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|_| self.stdin.write_all(b"\n"))
            .and_then(|_| self.stdin.flush())
            .with_context(|| format!("{} side: sending {line}", self.label))?;
        self.read()
    }

    /// Asks the child to exit and waits for it.
    pub fn exit(mut self) {
        let _ = self
            .stdin
            .write_all(b"\"Exit\"\n")
            .and_then(|_| self.stdin.flush());
        drop(self.stdin);
        let _ = self.child.wait();
    }
}
