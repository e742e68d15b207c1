//! Freezing and thawing a whole process tree, the way a checkpoint pauses a pod.
//!
//! A jupyter server's kernels run in sessions of their own (`kubectl-and-clients.md` §8), so
//! stopping the server's process group leaves them running. [`freeze_tree`] therefore
//! stops the root first (it can no longer start or restart kernels), then walks its
//! descendants through `/proc/<pid>/stat` and stops each one, repeating the walk until it
//! finds no new process. [`FrozenTree::thaw`] continues them in reverse order: deepest
//! first, the root last.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;

/// A process id as the kernel sees it.
pub type Pid = i32;

/// Why a freeze, thaw or kill failed.
#[derive(Debug, thiserror::Error)]
pub enum FreezeError {
    /// Sending a signal failed for a reason other than the process being gone already.
    #[error("cannot send {signal} to process {pid}: {source}")]
    Signal {
        signal: &'static str,
        pid: Pid,
        #[source]
        source: io::Error,
    },
    /// The root process of the tree does not exist.
    #[error("process {pid} does not exist")]
    NoSuchProcess { pid: Pid },
    /// `/proc` could not be read.
    #[error("cannot read /proc: {source}")]
    Proc {
        #[source]
        source: io::Error,
    },
}

/// The processes a freeze stopped, in the order they were stopped (root first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrozenTree {
    pids: Vec<Pid>,
}

impl FrozenTree {
    /// The stopped processes, root first.
    pub fn pids(&self) -> &[Pid] {
        &self.pids
    }

    /// Continues every process in reverse order of stopping (deepest first, root last).
    /// Processes that have exited meanwhile are skipped.
    pub fn thaw(&self) -> Result<(), FreezeError> {
        for &pid in self.pids.iter().rev() {
            signal(pid, libc::SIGCONT, "SIGCONT")?;
        }
        Ok(())
    }
}

/// Stops `root` and every descendant (see the module docs). Returns once every stopped
/// process shows state `T` in `/proc`, or has exited.
pub fn freeze_tree(root: Pid) -> Result<FrozenTree, FreezeError> {
    if !process_exists(root) {
        return Err(FreezeError::NoSuchProcess { pid: root });
    }
    signal(root, libc::SIGSTOP, "SIGSTOP")?;
    let mut stopped = vec![root];
    let mut seen: BTreeSet<Pid> = stopped.iter().copied().collect();
    loop {
        let fresh: Vec<Pid> = descendants(root)?
            .into_iter()
            .filter(|pid| !seen.contains(pid))
            .collect();
        if fresh.is_empty() {
            break;
        }
        for pid in fresh {
            signal(pid, libc::SIGSTOP, "SIGSTOP")?;
            seen.insert(pid);
            stopped.push(pid);
        }
    }
    wait_until_stopped(&stopped);
    Ok(FrozenTree { pids: stopped })
}

/// Kills `root` and every descendant with SIGKILL: stops them all first (so nothing can
/// spawn or restart in between), then kills each process and each distinct process group.
pub fn kill_tree(root: Pid) -> Result<(), FreezeError> {
    if !process_exists(root) {
        return Ok(());
    }
    let tree = freeze_tree(root)?;
    let groups: BTreeSet<Pid> = tree.pids.iter().filter_map(|&p| process_group(p)).collect();
    for &pid in &tree.pids {
        signal(pid, libc::SIGKILL, "SIGKILL")?;
    }
    for pgid in groups {
        // SAFETY: plain syscall; a negative pid addresses the process group.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    Ok(())
}

/// Every live descendant of `root` (not `root` itself), parents before children.
pub fn descendants(root: Pid) -> Result<Vec<Pid>, FreezeError> {
    let mut children: BTreeMap<Pid, Vec<Pid>> = BTreeMap::new();
    for (pid, stat) in all_stats()? {
        children.entry(stat.ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        if let Some(kids) = children.get(&parent) {
            for &kid in kids {
                out.push(kid);
                queue.push(kid);
            }
        }
    }
    Ok(out)
}

/// The one-letter state of a process from `/proc/<pid>/stat` (`R`, `S`, `T`, `Z`, ...).
pub fn process_state(pid: Pid) -> Option<char> {
    read_stat(pid).map(|s| s.state)
}

/// The process group of a process.
pub fn process_group(pid: Pid) -> Option<Pid> {
    read_stat(pid).map(|s| s.pgrp)
}

/// Whether the process exists and is not a zombie.
pub fn process_exists(pid: Pid) -> bool {
    matches!(process_state(pid), Some(state) if state != 'Z' && state != 'X')
}

struct Stat {
    state: char,
    ppid: Pid,
    pgrp: Pid,
}

/// Parses `/proc/<pid>/stat`: `pid (comm) state ppid pgrp ...`; comm may hold spaces and
/// parentheses, so the fields start after the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(Stat { state, ppid, pgrp })
}

fn read_stat(pid: Pid) -> Option<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn all_stats() -> Result<Vec<(Pid, Stat)>, FreezeError> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc").map_err(|source| FreezeError::Proc { source })? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<Pid>().ok())
        else {
            continue;
        };
        // A process may exit between the listing and the read: skip it.
        if let Some(stat) = read_stat(pid) {
            out.push((pid, stat));
        }
    }
    Ok(out)
}

fn signal(pid: Pid, sig: libc::c_int, name: &'static str) -> Result<(), FreezeError> {
    // SAFETY: plain syscall with no pointers.
    if unsafe { libc::kill(pid, sig) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        return Ok(()); // already gone
    }
    Err(FreezeError::Signal {
        signal: name,
        pid,
        source: err,
    })
}

/// SIGSTOP is delivered asynchronously; spin briefly until each process reports `T` (or
/// has exited). Delivery takes microseconds, so this bound is a safety net, not a wait.
fn wait_until_stopped(pids: &[Pid]) {
    for _ in 0..2000 {
        let pending = pids
            .iter()
            .any(|&pid| matches!(process_state(pid), Some(s) if s != 'T' && s != 't' && s != 'Z' && s != 'X'));
        if !pending {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn stat_parsing_survives_odd_command_names() {
        let s = parse_stat("42 (a) b (c)) S 7 42 42 0 -1").unwrap();
        assert_eq!((s.state, s.ppid, s.pgrp), ('S', 7, 42));
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn freezes_a_tree_whose_grandchild_has_its_own_session_and_thaws_it() {
        // sh -> (setsid sh -> sleep): the grandchild runs in a session of its own, like a kernel.
        let mut child = Command::new("sh")
            .args(["-c", "setsid sh -c 'sleep 30' & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let root = child.id() as Pid;
        let mut tree_seen = Vec::new();
        for _ in 0..500 {
            tree_seen = descendants(root).unwrap();
            if tree_seen.len() >= 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(tree_seen.len() >= 2, "descendants: {tree_seen:?}");
        let own_session = tree_seen
            .iter()
            .any(|&p| process_group(p) != Some(root) && process_group(p).is_some());
        assert!(
            own_session,
            "expected a descendant outside the root's group"
        );

        let frozen = freeze_tree(root).unwrap();
        assert_eq!(frozen.pids()[0], root);
        for &pid in frozen.pids() {
            assert_eq!(process_state(pid), Some('T'), "pid {pid} not stopped");
        }
        frozen.thaw().unwrap();
        for &pid in frozen.pids() {
            let mut state = process_state(pid);
            for _ in 0..200 {
                if state != Some('T') {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
                state = process_state(pid);
            }
            assert_ne!(state, Some('T'), "pid {pid} still stopped");
        }
        let all = frozen.pids().to_vec();
        kill_tree(root).unwrap();
        child.wait().unwrap();
        for pid in all.into_iter().skip(1) {
            let mut alive = process_exists(pid);
            for _ in 0..200 {
                if !alive {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
                alive = process_exists(pid);
            }
            assert!(!alive, "pid {pid} survived kill_tree");
        }
    }
}
