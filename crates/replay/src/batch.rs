// SPDX-License-Identifier: MIT
//! Events in batches, as the replay loop consumes them: accesses as 16-byte [`Op`]s (page,
//! cgroup, content; no enum to match, nothing to clone), every other event kept whole in
//! order beside them. Sources fill a [`Batch`] at a time, so generating, reading and
//! replaying events each run as a tight loop.

use uzswap_trace::{Content, Event, MAX_PAGE};

/// What an [`Op`] is (the top bits of its page word; pages stay below 2^52).
const KIND_SHIFT: u32 = 62;
const READ: u64 = 0;
const WRITE: u64 = 1;
const WRITE_ZERO: u64 = 2;
const CONTROL: u64 = 3;
/// Set on an access whose translation the modelled TLB held (see `driver::TlbStage`).
const TLB_HIT: u64 = 1 << 60;

/// One event of a batch: a read, a write (of corpus page `content` or of zeros), or a
/// placeholder for the batch's next non-access event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    word: u64,
    cg: u32,
    content: u32,
}

/// An access as the replay applies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write(Content),
}

impl Op {
    #[inline]
    pub fn read(cg: u32, page: u64) -> Op {
        debug_assert!(page <= MAX_PAGE);
        Op {
            word: page,
            cg,
            content: 0,
        }
    }

    #[inline]
    pub fn write(cg: u32, page: u64, content: Content) -> Op {
        debug_assert!(page <= MAX_PAGE);
        let (kind, c) = match content {
            Content::Page(i) => (WRITE, i),
            Content::Zero => (WRITE_ZERO, 0),
        };
        Op {
            word: page | (kind << KIND_SHIFT),
            cg,
            content: c,
        }
    }

    /// Whether the TLB stage found this access's translation cached.
    #[inline]
    pub fn tlb_hit(self) -> bool {
        self.word & TLB_HIT != 0
    }

    #[inline]
    pub(crate) fn set_tlb_hit(&mut self) {
        self.word |= TLB_HIT;
    }

    const CONTROL: Op = Op {
        word: CONTROL << KIND_SHIFT,
        cg: 0,
        content: 0,
    };

    /// The cgroup, page and access; `None` for a non-access event.
    #[inline]
    pub fn access(self) -> Option<(u32, u64, Access)> {
        let page = self.word & MAX_PAGE;
        match self.word >> KIND_SHIFT {
            READ => Some((self.cg, page, Access::Read)),
            WRITE => Some((self.cg, page, Access::Write(Content::Page(self.content)))),
            WRITE_ZERO => Some((self.cg, page, Access::Write(Content::Zero))),
            _ => None,
        }
    }

    /// The event this op stands for (`control`: the batch's event it refers to).
    pub fn to_event(self, control: impl FnOnce() -> Event) -> Event {
        match self.access() {
            Some((cg, page, Access::Read)) => Event::Read { cg, page },
            Some((cg, page, Access::Write(content))) => Event::Write { cg, page, content },
            None => control(),
        }
    }
}

/// A batch of events: `ops` in order, the non-access events, each standing where a
/// control op is in `ops`, and the trace's clock: `(i, ns)` says that op `i` (or the batch's
/// end, for `i == ops.len()`) comes `ns` nanoseconds into the recorded run, in op order.
#[derive(Default, Debug)]
pub struct Batch {
    pub ops: Vec<Op>,
    pub events: Vec<Event>,
    pub clock: Vec<(u32, u64)>,
}

impl Batch {
    /// An empty batch with room for `n` ops.
    pub fn with_capacity(n: usize) -> Batch {
        Batch {
            ops: Vec::with_capacity(n),
            events: Vec::new(),
            clock: Vec::new(),
        }
    }

    /// The next event pushed happens `ns` into the recorded run.
    #[inline]
    pub fn push_clock(&mut self, ns: u64) {
        self.clock.push((self.ops.len() as u32, ns));
    }

    #[inline(always)]
    pub fn push(&mut self, ev: Event) {
        match ev {
            Event::Read { cg, page } if page <= MAX_PAGE => self.ops.push(Op::read(cg, page)),
            Event::Write { cg, page, content } if page <= MAX_PAGE => {
                self.ops.push(Op::write(cg, page, content));
            }
            ev => {
                self.ops.push(Op::CONTROL);
                self.events.push(ev);
            }
        }
    }

    pub fn clear(&mut self) {
        self.ops.clear();
        self.events.clear();
        self.clock.clear();
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Move the ops from `op` on (and their events, from `event` on) to the end of `out`.
    pub fn move_tail(&mut self, op: usize, event: usize, out: &mut Batch) {
        let base = out.ops.len() as u32;
        out.clock.extend(
            self.clock
                .iter()
                .filter(|&&(i, _)| i as usize >= op)
                .map(|&(i, ns)| (i - op as u32 + base, ns)),
        );
        out.ops.extend_from_slice(&self.ops[op..]);
        out.events.extend(self.events.drain(event..));
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip() {
        let evs = vec![
            Event::Read { cg: 3, page: 0 },
            Event::Write {
                cg: 1,
                page: MAX_PAGE,
                content: Content::Page(u32::MAX),
            },
            Event::Free {
                cg: 1,
                page: 4,
                count: 2,
            },
            Event::Write {
                cg: 2,
                page: 77,
                content: Content::Zero,
            },
            Event::Write {
                cg: u32::MAX,
                page: 1,
                content: Content::Page(0),
            },
            Event::RemoveCgroup { cg: 1 },
        ];
        let mut b = Batch::default();
        for e in &evs {
            b.push(e.clone());
        }
        assert_eq!(b.len(), evs.len());
        assert_eq!(b.events.len(), 2);
        let mut controls = b.events.iter().cloned();
        let back: Vec<Event> = b
            .ops
            .iter()
            .map(|o| o.to_event(|| controls.next().unwrap()))
            .collect();
        assert_eq!(back, evs);
    }

    #[test]
    fn clock_marks_follow_their_ops_when_a_tail_moves() {
        let mut b = Batch::default();
        b.push_clock(5);
        b.push(Event::Read { cg: 1, page: 0 });
        b.push(Event::Read { cg: 1, page: 1 });
        b.push_clock(9);
        b.push(Event::RemoveCgroup { cg: 1 });
        b.push_clock(12);
        assert_eq!(b.clock, vec![(0, 5), (2, 9), (3, 12)]);
        let mut out = Batch::default();
        out.push(Event::Read { cg: 2, page: 7 });
        b.move_tail(1, 0, &mut out);
        assert!(b.is_empty() && b.clock.is_empty());
        assert_eq!(out.len(), 3);
        assert_eq!(out.clock, vec![(2, 9), (3, 12)]);
        out.clear();
        assert!(out.clock.is_empty());
    }
}
