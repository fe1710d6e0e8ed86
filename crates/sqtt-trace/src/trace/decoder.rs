//! The per-wave decoder: splits records per wave slot and instance, decodes marker words,
//! keeps each wave's scope stack and pending payload, and calls the [`Sink`].

use super::clock::{att_delay, clock_relative, clock_shift, ClockState, DomainStat};
use super::files::{file_warnings, parse_files, Batch};
use super::{
    close_time, loss_after, wave_name, AddressBlock, ClockCorrection, Header, Options, Sink,
    TraceDir, WaveInfo,
};
use crate::blocks::parse_block;
use crate::json::{Record, SlotKey, FLAG_PRIV};
use crate::markers::{decode_word, Kind, Marker};
use crate::names::{NameId, Names};
use crate::warnings::Warnings;
use foldhash::{HashMap, HashMapExt};
use indicatif::ProgressBar;

enum Pending {
    None,
    Skip(u32),
    Block {
        marker_id: u32,
        time: i64,
        words: Vec<u32>,
        need: u32,
    },
}

struct Slot<W> {
    info: WaveInfo,
    /// Time range in which records belong to this instance.
    from: i64,
    until: i64,
    /// The packet loss that ends this instance ([`super::loss_after`]), and whether a record
    /// at or after it was met.
    loss: Option<i64>,
    lost: bool,
    stack: Vec<NameId>,
    last_time: i64,
    last_header: i64,
    pending: Pending,
    sink: W,
}

/// Warning classes of a packet loss ([`super::loss_after`]), read as AMD's marker stream reads it.
const LOSS_RECORDS: &str =
    "records after a packet loss, dropped until their slot starts a new wave (as rocprof-trace-decoder does)";
const LOSS_PAYLOAD: &str = "payload blocks cut by a packet loss (dropped)";
const LOSS_SCOPES: &str =
    "waves with scopes open at a packet loss (closed at their last record before it)";

/// Deepest scope stack kept per wave; deeper pushes are dropped with a warning.
pub const MAX_DEPTH: usize = 4096;
/// Largest address block kept (payload words); larger `R:` counts are skipped.
const MAX_BLOCK: u32 = 1 << 16;

pub(super) struct Decoder<'a, S: Sink> {
    dir: &'a TraceDir,
    opts: &'a Options,
    names: &'a Names,
    sink: S,
    normalised: bool,
    pub(super) clock: ClockState,
    slots: HashMap<SlotKey, Slot<S::Wave>>,
    pub(super) records: u64,
    pub(super) headers: u64,
    pub(super) blocks: u64,
    pub(super) priv_dropped: u64,
}

impl<'a, S: Sink> Decoder<'a, S> {
    pub(super) fn new(
        dir: &'a TraceDir,
        opts: &'a Options,
        names: &'a Names,
        sink: S,
        normalised: bool,
        clock: ClockState,
    ) -> Self {
        Decoder {
            dir,
            opts,
            names,
            sink,
            normalised,
            clock,
            slots: HashMap::new(),
            records: 0,
            headers: 0,
            blocks: 0,
            priv_dropped: 0,
        }
    }

    /// Reads the directory's shaderdata files on a second thread ([`parse_files`]) and decodes
    /// their records here, in file order: the records, warnings and sink events are the same as
    /// reading and decoding on one thread, while parsing and decoding overlap.
    pub(super) fn feed_files(&mut self, pb: &ProgressBar, w: &mut Warnings) {
        let dir = self.dir;
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(4);
            let (back, spare) = std::sync::mpsc::channel::<Vec<Record>>();
            s.spawn(move || parse_files(&dir.shaderdata, pb, &tx, &spare));
            for batch in rx {
                match batch {
                    Batch::Records(se, mut v) => {
                        for r in v.drain(..) {
                            self.record(se, r, w);
                        }
                        // The parser may have finished: then the buffer is simply dropped.
                        let _ = back.send(v);
                    }
                    Batch::Unreadable(path, e) => w.add("shaderdata file unreadable", || {
                        format!("{}: {e}", path.display())
                    }),
                    Batch::Done(path, res) => file_warnings(path, &res, w),
                }
            }
        });
    }

    /// (instance, kernel_id, valid from, valid until) for a record of a slot at `time`.
    /// `guess` is a likely answer for the number of launches at or before `time` (the slot's
    /// next launch, as records arrive in time order); it is used only when it is that number,
    /// which saves a binary search over a long launch list per wave instance.
    fn locate(
        &self,
        key: SlotKey,
        time: i64,
        guess: Option<usize>,
    ) -> (u32, Option<i64>, i64, i64) {
        let Some(l) = self.dir.occupancy.launches.get(&key) else {
            return (0, None, i64::MIN, i64::MAX);
        };
        let is_point = |p: usize| {
            p <= l.len() && (p == 0 || l[p - 1].0 <= time) && l.get(p).is_none_or(|x| x.0 > time)
        };
        let i = match guess {
            Some(p) if is_point(p) => p,
            _ => l.partition_point(|(t, _)| *t <= time),
        };
        let until = l.get(i).map_or(i64::MAX, |x| x.0);
        if i == 0 {
            (0, l.first().map(|x| x.1), i64::MIN, until)
        } else {
            ((i - 1) as u32, Some(l[i - 1].1), l[i - 1].0, until)
        }
    }

    fn new_slot(
        &self,
        key: SlotKey,
        instance: u32,
        kernel_id: Option<i64>,
        from: i64,
        until: i64,
    ) -> WaveInfo {
        let d = self.dir;
        let end = d.occupancy.ends.get(&key).and_then(|e| {
            let i = e.partition_point(|t| *t < from);
            e.get(i).copied().filter(|t| *t < until)
        });
        let mut co = kernel_id.and_then(|k| d.kernel_code_object.get(&k).copied());
        if co.is_none() && d.tables.len() == 1 {
            co = d.tables.keys().next().copied();
        }
        WaveInfo {
            se: key.0,
            cu: key.1,
            simd: key.2,
            slot: key.3,
            instance,
            kernel_id,
            kernel: kernel_id.and_then(|k| d.kernel_names.get(&k).copied()),
            code_object: co,
            code_object_frame: co.and_then(|c| d.code_object_frames.get(&c).copied()),
            end,
        }
    }

    /// Ends a wave instance; `next` is the time of the first record of the slot's next wave
    /// instance, when one follows.
    /// A wave alive at its packet loss (launched before it, not ended before it by occupancy)
    /// closes its open scopes at its last record before the loss: nothing after it is known.
    fn finish(&mut self, mut slot: Slot<S::Wave>, next: Option<i64>, w: &mut Warnings) {
        if !matches!(slot.pending, Pending::None) {
            w.add(
                "payload cut short (wave ended inside a payload block)",
                || wave_name(&slot.info),
            );
        }
        let cut = slot
            .loss
            .filter(|t| slot.info.end.is_none_or(|e| *t < e) && !slot.stack.is_empty());
        let close = match cut {
            Some(t) => {
                w.add(LOSS_SCOPES, || format!("{} at {t}", wave_name(&slot.info)));
                slot.last_time
            }
            None => close_time(&slot.info, slot.last_time, next),
        };
        self.sink
            .wave_end(&slot.info, &mut slot.sink, close, &slot.stack);
    }

    pub(super) fn finish_all(&mut self, w: &mut Warnings) {
        let mut keys: Vec<_> = self.slots.keys().copied().collect();
        keys.sort_unstable();
        for k in keys {
            if let Some(s) = self.slots.remove(&k) {
                self.finish(s, None, w);
            }
        }
    }

    fn record(&mut self, se: u32, r: Record, w: &mut Warnings) {
        self.records += 1;
        if r.flags & FLAG_PRIV != 0 {
            self.priv_dropped += 1;
            return;
        }
        let o = self.opts;
        if (!o.cu.is_empty() && !o.cu.contains(&r.cu))
            || (!o.simd.is_empty() && !o.simd.contains(&r.simd))
            || (!o.wave.is_empty() && !o.wave.contains(&r.wave))
        {
            return;
        }
        let key = (se, r.cu, r.simd, r.wave);
        let current =
            matches!(self.slots.get(&key), Some(s) if s.from <= r.time && r.time < s.until);
        if !current {
            // The launch after the slot's current instance, when there is one.
            let guess = self.slots.get(&key).map(|s| {
                if s.from == i64::MIN {
                    1
                } else {
                    s.info.instance as usize + 2
                }
            });
            let (instance, kernel_id, from, until) = self.locate(key, r.time, guess);
            let same = matches!(self.slots.get(&key), Some(s) if s.info.instance == instance);
            if same {
                // An earlier record than the slot's range (out of order): keep the instance.
                w.add("records out of time order within a wave", || {
                    wave_name(&self.slots[&key].info)
                });
            } else {
                if let Some(old) = self.slots.remove(&key) {
                    self.finish(old, Some(r.time), w);
                }
                let info = self.new_slot(key, instance, kernel_id, from, until);
                let losses = self.dir.occupancy.losses.get(&se);
                let loss = losses.and_then(|l| loss_after(l, from, until));
                let mut sink = S::Wave::default();
                self.sink.wave_begin(&info, &mut sink, self.names);
                self.slots.insert(
                    key,
                    Slot {
                        info,
                        from,
                        until,
                        loss,
                        lost: false,
                        stack: Vec::new(),
                        last_time: r.time,
                        last_header: i64::MIN,
                        pending: Pending::None,
                        sink,
                    },
                );
            }
        }
        let Some(slot) = self.slots.get_mut(&key) else {
            return;
        };
        if slot.loss.is_some_and(|t| r.time >= t) {
            if !slot.lost {
                slot.lost = true;
                if !matches!(slot.pending, Pending::None) {
                    slot.pending = Pending::None;
                    w.add(LOSS_PAYLOAD, || wave_name(&slot.info));
                }
            }
            w.add(LOSS_RECORDS, || {
                format!("{} at {}", wave_name(&slot.info), r.time)
            });
            return;
        }
        if r.time < slot.last_time {
            w.add("records out of time order within a wave", || {
                wave_name(&slot.info)
            });
        }
        slot.last_time = slot.last_time.max(r.time);
        let d = self.dir;
        let table = slot.info.code_object.and_then(|c| d.tables.get(&c));
        // Payload records.
        match &mut slot.pending {
            Pending::None => {}
            Pending::Skip(n) => {
                *n -= 1;
                if *n == 0 {
                    slot.pending = Pending::None;
                }
                return;
            }
            Pending::Block { words, need, .. } => {
                words.push(r.value);
                if words.len() as u32 == *need {
                    if let (
                        Pending::Block {
                            marker_id,
                            time,
                            words,
                            ..
                        },
                        Some(t),
                    ) = (std::mem::replace(&mut slot.pending, Pending::None), table)
                    {
                        if let Some(m) = t.markers.get(&marker_id) {
                            let name = self.names.get(m.name);
                            match parse_block(name, &words, t.wave_size) {
                                Ok((exec, lanes, addresses, components)) => {
                                    self.blocks += 1;
                                    let b = AddressBlock {
                                        marker_id,
                                        name: m.name,
                                        name_text: name,
                                        source: m.loc.as_deref(),
                                        time,
                                        exec,
                                        lanes,
                                        addresses,
                                        components,
                                    };
                                    self.sink.address_block(&slot.info, &mut slot.sink, &b);
                                }
                                Err(e) => w.add("address block not decodable (dropped)", || {
                                    format!("{name} id {marker_id}: {e}")
                                }),
                            }
                        }
                    }
                }
                return;
            }
        }
        let Some(t) = table else {
            w.add(
                "records of waves whose code object has no funcmap (dropped)",
                || match slot.info.kernel_id {
                    Some(k) => format!("{} kernel_id {k}", wave_name(&slot.info)),
                    None => format!("{} (no kernel_id)", wave_name(&slot.info)),
                },
            );
            return;
        };
        let layout = if self.normalised { None } else { t.clock };
        let word = decode_word(r.value, layout, |id| t.markers.contains_key(&id));
        let marker = t.markers.get(&word.id);
        let bare_exit = word.exit_prev && !word.enter && word.id == 0;
        if marker.is_none() && !bare_exit {
            w.add("marker ids absent from the funcmap (dropped)", || {
                format!(
                    "value {:#x} (id {}) in {}",
                    r.full_value(),
                    word.id,
                    wave_name(&slot.info)
                )
            });
            return;
        }
        let mut time = r.time;
        if let (Some(sampled), Some(l)) = (word.sampled, layout) {
            let att = self.opts.clock_correction == ClockCorrection::Att;
            if att || marker.is_none_or(|m| m.payload == 0) {
                // att.py's domain is the SE and the layout; CU and SIMD are not part of it.
                let dom = if att {
                    (se, u32::MAX, u32::MAX, l)
                } else {
                    (se, r.cu, r.simd, l)
                };
                let sampled = sampled as i64;
                let delay = |s: &DomainStat| {
                    if att {
                        att_delay(l, time, sampled)
                    } else {
                        clock_relative(l, time, sampled, s.origin_time, s.origin_sampled)
                    }
                };
                match &mut self.clock {
                    ClockState::Off => {}
                    ClockState::Measure(m) => {
                        let first = DomainStat {
                            origin_time: time,
                            origin_sampled: sampled,
                            min_relative: 0,
                        };
                        let d = delay(&first);
                        let s = m.entry(dom).or_insert(DomainStat {
                            min_relative: d,
                            ..first
                        });
                        s.min_relative = s.min_relative.min(d);
                    }
                    ClockState::Apply(m) => {
                        if let Some(s) = m.get(&dom) {
                            let d = delay(s);
                            time -= if att {
                                d - s.min_relative
                            } else {
                                clock_shift(l, d, s.min_relative)
                            };
                        }
                    }
                }
            }
        }
        time = time.max(slot.last_header);
        slot.last_header = time;
        self.headers += 1;
        let mut h = Header {
            time,
            marker_id: word.id,
            popped: false,
            pushed: None,
            point: None,
        };
        let before = slot.stack.len();
        if word.exit_prev {
            if before > 0 {
                h.popped = true;
            } else {
                w.add("exit on an empty stack (stack underflow)", || {
                    wave_name(&slot.info)
                });
            }
        }
        if let Some(m) = marker {
            let scope = matches!(m.kind, Kind::Function | Kind::User);
            if word.enter && scope {
                if before - usize::from(h.popped) < MAX_DEPTH {
                    h.pushed = Some((m.name, m.kind));
                } else {
                    w.add("scope stack deeper than 4096 (push dropped)", || {
                        wave_name(&slot.info)
                    });
                }
            } else if word.enter || !word.exit_prev {
                h.point = Some(m.name);
            }
        }
        self.sink
            .header(&slot.info, &mut slot.sink, &h, &slot.stack);
        if h.popped {
            slot.stack.pop();
        }
        if let Some((n, _)) = h.pushed {
            slot.stack.push(n);
        }
        if let Some(m) = marker {
            arm_payload(slot, m, word.id, time, self.names, w);
        }
    }
}

fn arm_payload<W>(
    slot: &mut Slot<W>,
    m: &Marker,
    id: u32,
    time: i64,
    names: &Names,
    w: &mut Warnings,
) {
    if m.payload == 0 {
        return;
    }
    let name = names.get(m.name);
    if name.starts_with("addr_trace_") && m.payload <= MAX_BLOCK {
        slot.pending = Pending::Block {
            marker_id: id,
            time,
            words: Vec::with_capacity(m.payload as usize),
            need: m.payload,
        };
    } else {
        if name.starts_with("addr_trace_") {
            w.add("address block larger than 65536 words (skipped)", || {
                format!("{name} id {id}")
            });
        }
        slot.pending = Pending::Skip(m.payload);
    }
}
