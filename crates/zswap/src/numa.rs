// SPDX-License-Identifier: MIT
//! NUMA node of the calling thread (entries go on the LRU list of the node that stored them,
//! as the kernel puts an entry on its page's node, unless the caller names the node).

use std::sync::OnceLock;

/// Most NUMA nodes a cache can have lists for (an entry records its node in a byte).
pub const MAX_NUMA_NODES: usize = 64;

struct Topology {
    nodes: usize,
    cpu_to_node: Vec<u8>,
}

fn parse_list(s: &str) -> Vec<usize> {
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let mut it = part.splitn(2, '-');
        let a = it.next().and_then(|x| x.parse::<usize>().ok());
        let b = it.next().and_then(|x| x.parse::<usize>().ok());
        match (a, b) {
            (Some(a), Some(b)) if b >= a && b - a < 4096 => v.extend(a..=b),
            (Some(a), None) => v.push(a),
            _ => {}
        }
    }
    v
}

fn topology() -> &'static Topology {
    static T: OnceLock<Topology> = OnceLock::new();
    T.get_or_init(|| {
        let online = std::fs::read_to_string("/sys/devices/system/node/online").unwrap_or_default();
        let nodes = parse_list(&online);
        let nr = nodes
            .iter()
            .max()
            .map_or(1, |m| m + 1)
            .clamp(1, MAX_NUMA_NODES);
        let mut cpu_to_node = Vec::new();
        if nr > 1 {
            for n in nodes {
                let p = format!("/sys/devices/system/node/node{n}/cpulist");
                for cpu in parse_list(&std::fs::read_to_string(p).unwrap_or_default()) {
                    if cpu_to_node.len() <= cpu {
                        cpu_to_node.resize(cpu + 1, 0);
                    }
                    cpu_to_node[cpu] = n as u8;
                }
            }
        }
        Topology {
            nodes: nr,
            cpu_to_node,
        }
    })
}

/// Number of NUMA nodes (at least 1).
pub fn nr_nodes() -> usize {
    topology().nodes
}

/// The node of the CPU this thread runs on.
#[inline]
pub(crate) fn current_node(nodes: usize) -> usize {
    if nodes <= 1 {
        return 0;
    }
    // SAFETY: sched_getcpu takes no arguments and only returns a number.
    let cpu = unsafe { libc::sched_getcpu() };
    let t = topology();
    usize::try_from(cpu)
        .ok()
        .and_then(|c| t.cpu_to_node.get(c))
        .map_or(0, |&n| (n as usize).min(nodes - 1))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parse() {
        assert_eq!(super::parse_list("0-2,5\n"), vec![0, 1, 2, 5]);
        assert_eq!(super::parse_list(""), Vec::<usize>::new());
        assert!(super::nr_nodes() >= 1);
    }
}
