// SPDX-License-Identifier: MIT
//! A dedicated memory cgroup for tests: create it under the root of the memory controller
//! (cgroup v1 `memory` hierarchy or cgroup v2 with `memory` enabled for children), set a
//! limit, attach processes, read its reclaim counters, and remove it on Drop (its processes
//! are moved to the parent first, so the directory can always go).
//!
//! Only cgroups this module created are ever written to; the controller's global settings
//! (the root's `cgroup.subtree_control`, its limits) are read, never changed.

use crate::sysfs::{read_string, write_value};
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use uzswap_types::unescape_mount_path;

/// The cgroup hierarchy holding the memory controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// cgroup v1: a `cgroup` mount with the `memory` option.
    V1,
    /// cgroup v2: a `cgroup2` mount whose root enables `memory` for its children.
    V2,
}

/// Where the memory controller is mounted, if anywhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryController {
    /// cgroup v1 (`memory` controller hierarchy) or v2 (unified).
    pub version: Version,
    /// The hierarchy's mount point.
    pub root: PathBuf,
}

/// Find the memory controller in `/proc/self/mounts`: a v1 `memory` hierarchy first, else a
/// v2 mount that offers `memory` to its children. `Err(NotAvailable)` names what is missing.
pub fn memory_controller() -> Result<MemoryController> {
    let mounts_path = Path::new("/proc/self/mounts");
    let mounts = read_string(mounts_path)?;
    let mut v2_roots = Vec::new();
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(dir), Some(fstype), Some(opts)) = (f.get(1), f.get(2), f.get(3)) else {
            continue;
        };
        let dir = PathBuf::from(unescape_mount_path(dir));
        match *fstype {
            "cgroup" if opts.split(',').any(|o| o == "memory") => {
                return Ok(MemoryController {
                    version: Version::V1,
                    root: dir,
                });
            }
            "cgroup2" => v2_roots.push(dir),
            _ => {}
        }
    }
    for root in v2_roots {
        // Children get the controller only if the root enables it; changing that is a global
        // setting this module does not touch.
        let ctl = read_string(&root.join("cgroup.subtree_control")).unwrap_or_default();
        if ctl.split_whitespace().any(|c| c == "memory") {
            return Ok(MemoryController {
                version: Version::V2,
                root,
            });
        }
    }
    Err(Error::NotAvailable(
        "memory cgroup controller (no v1 'memory' mount, no v2 mount enabling 'memory')".into(),
    ))
}

/// A memory cgroup this process created; removed when dropped.
#[derive(Debug)]
pub struct MemCgroup {
    ctl: MemoryController,
    path: PathBuf,
    removed: bool,
}

impl MemCgroup {
    /// Create `name` directly under the memory controller's root. The name must be one plain
    /// path component and must not exist yet (a leftover of a crashed run is reported as
    /// `Busy`, never adopted).
    pub fn create(name: &str) -> Result<MemCgroup> {
        let ctl = memory_controller()?;
        let root = ctl.root.clone();
        Self::create_in(ctl, &root, name)
    }

    /// Create `name` under `parent` (whose limits then cover it, as the kernel charges a
    /// cgroup's ancestors too). Drop or remove it before `parent`.
    pub fn create_under(parent: &MemCgroup, name: &str) -> Result<MemCgroup> {
        Self::create_in(parent.ctl.clone(), &parent.path, name)
    }

    fn create_in(ctl: MemoryController, dir: &Path, name: &str) -> Result<MemCgroup> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(Error::InvalidArgument(format!(
                "cgroup name {name:?}: expected one path component"
            )));
        }
        let path = dir.join(name);
        std::fs::create_dir(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Error::Busy(format!("cgroup {} already exists", path.display()))
            } else {
                Error::io(&path, e)
            }
        })?;
        Ok(MemCgroup {
            ctl,
            path,
            removed: false,
        })
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The hierarchy it lives in.
    pub fn version(&self) -> Version {
        self.ctl.version
    }

    fn file(&self, v1: &str, v2: &str) -> PathBuf {
        self.path.join(match self.ctl.version {
            Version::V1 => v1,
            Version::V2 => v2,
        })
    }

    /// Set the memory limit (`memory.limit_in_bytes` / `memory.max`) to `bytes`.
    pub fn set_limit(&self, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Err(Error::InvalidArgument("a memory limit of 0 bytes".into()));
        }
        write_value(
            &self.file("memory.limit_in_bytes", "memory.max"),
            &bytes.to_string(),
        )
    }

    /// Move process `pid` (all its threads) into this cgroup.
    pub fn attach(&self, pid: u32) -> Result<()> {
        write_value(&self.path.join("cgroup.procs"), &pid.to_string())
    }

    /// The processes in this cgroup now.
    pub fn pids(&self) -> Result<Vec<u32>> {
        parse_pids(&self.path.join("cgroup.procs"))
    }

    /// Memory charged to the cgroup now, in bytes.
    pub fn usage_bytes(&self) -> Result<u64> {
        crate::sysfs::read_u64(&self.file("memory.usage_in_bytes", "memory.current"))
    }

    /// Times the cgroup hit its limit (v1 `memory.failcnt`, v2 `max` of `memory.events`).
    pub fn limit_hits(&self) -> Result<u64> {
        match self.ctl.version {
            Version::V1 => crate::sysfs::read_u64(&self.path.join("memory.failcnt")),
            Version::V2 => {
                let p = self.path.join("memory.events");
                let text = read_string(&p)?;
                crate::sysfs::parse_name_value(&p, &text)?
                    .into_iter()
                    .find(|(n, _)| n == "max")
                    .map(|(_, v)| v)
                    .ok_or_else(|| Error::parse(&p, "no 'max' line"))
            }
        }
    }

    /// The cgroup's own `memory.pressure` (v2, or v1 with cgroup1 PSI), if the kernel has it.
    pub fn pressure_path(&self) -> Option<PathBuf> {
        let p = self.path.join("memory.pressure");
        p.exists().then_some(p)
    }

    /// Move every process back to the parent and remove the directory. Retries for up to a
    /// second while the kernel still counts exiting tasks.
    pub fn remove(mut self) -> Result<()> {
        self.remove_inner()
    }

    fn remove_inner(&mut self) -> Result<()> {
        if self.removed {
            return Ok(());
        }
        let parent_procs = self.ctl.root.join("cgroup.procs");
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            for pid in self.pids().unwrap_or_default() {
                // A task that exited meanwhile is gone anyway (ESRCH): nothing to move.
                let _ = write_value(&parent_procs, &pid.to_string());
            }
            match std::fs::remove_dir(&self.path) {
                Ok(()) => {
                    self.removed = true;
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    self.removed = true;
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        if let Err(e) = self.remove_inner() {
            use std::io::Write as _;
            writeln!(
                std::io::stderr(),
                "uzswap-kernel: cannot remove cgroup: {}",
                crate::error_chain(&e)
            )
            .ok();
        }
    }
}

fn parse_pids(path: &Path) -> Result<Vec<u32>> {
    let text = read_string(path)?;
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.parse::<u32>()
                .map_err(|e| Error::parse(path, format!("pid {l:?}: {e}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused() {
        for n in ["", "a/b", ".", ".."] {
            assert!(matches!(
                MemCgroup::create(n),
                Err(Error::InvalidArgument(_))
            ));
        }
    }

    #[test]
    fn create_limit_attach_remove() {
        let Some(_lock) = crate::kernel_test_guard("cgroup_create_limit_attach_remove") else {
            return;
        };
        if memory_controller().is_err() || !crate::is_root() {
            use std::io::Write as _;
            writeln!(
                std::io::stderr(),
                "SKIPPED: no memory cgroup controller (or not root)"
            )
            .ok();
            return;
        }
        let name = format!("uzswap-cgtest-{}", std::process::id());
        let cg = MemCgroup::create(&name).expect("create");
        assert!(matches!(MemCgroup::create(&name), Err(Error::Busy(_))));
        cg.set_limit(64 << 20).expect("limit");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        cg.attach(child.id()).expect("attach");
        assert_eq!(cg.pids().expect("pids"), vec![child.id()]);
        let path = cg.path().to_path_buf();
        // The process is still alive: remove moves it out first.
        cg.remove().expect("remove");
        assert!(!path.exists());
        child.kill().ok();
        child.wait().ok();
    }
}
