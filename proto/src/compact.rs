//! A pair in a compact watch's form ([`pb::CompactPair`]), pure: its ends
//! as node numbers rather than names, its network on the update rather
//! than on every pair, its quality left out where the weights give it
//! back, and its figures as short decimals wherever those give back the
//! very same double. Nothing is rounded: [`unpack`] returns the
//! [`pb::Pair`] that [`pack`] was given, bit for bit, so that a follower of
//! a compact watch places exactly as the collector does.
//!
//! Why it pays: a follower of a 5,000-node cluster takes every changed pair
//! of every snapshot, hundreds of thousands a minute. As a [`pb::Pair`] one
//! is about 130 bytes, most of them two node names, the network's name and
//! doubles whose seven significant digits take 9 bytes where 4 or 5 do.

use netaware_core::score::{Fallback, Terms};

use crate::convert;
use crate::v1 as pb;

/// Why a compact pair cannot be unpacked: the stream is corrupt or from a
/// collector that speaks another form; the follower starts a new watch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// An end numbered past the update's node list.
    #[error("a compact pair names node {index} of {nodes}")]
    NoSuchNode {
        /// The number its step gave.
        index: i64,
        /// How many nodes the follower holds.
        nodes: usize,
    },
    /// Fewer figures than its `present` bits say.
    #[error("a compact pair is short of figures: {present:#x} with {figures}")]
    ShortOfFigures {
        /// Its `present` bits.
        present: u64,
        /// How many figures it carried.
        figures: usize,
    },
    /// More figures than its `present` bits say.
    #[error("a compact pair carries {figures} figures where {present:#x} says fewer")]
    TooManyFigures {
        /// Its `present` bits.
        present: u64,
        /// How many figures it carried.
        figures: usize,
    },
    /// A decimal with a scale outside -10..=21.
    #[error("a compact figure {0:#x} is no decimal this form knows")]
    BadDecimal(u64),
    /// Bits of `present` that the form does not know.
    #[error("a compact pair's present bits {0:#x} say more than this form knows")]
    UnknownBits(u64),
    /// A term's source that the wire does not know.
    #[error("a compact pair's flags {0:#x} name no known source")]
    BadFlags(u32),
}

/// The figures' places in [`pb::CompactPair::figures`] and bits in its
/// `present`, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    RttMedian = 0,
    RttP99 = 1,
    Jitter = 2,
    LossRatio = 3,
    Samples = 4,
    Age = 5,
    Quality = 6,
    DelayTerm = 7,
    LossTerm = 8,
    ThroughputTerm = 9,
    OneWayLoss = 10,
    ThroughputBps = 11,
    ThroughputRetransmits = 12,
    ThroughputTcpRtt = 13,
    ThroughputAge = 14,
}

/// Every slot, in the order the figures go.
const SLOTS: [Slot; 15] = [
    Slot::RttMedian,
    Slot::RttP99,
    Slot::Jitter,
    Slot::LossRatio,
    Slot::Samples,
    Slot::Age,
    Slot::Quality,
    Slot::DelayTerm,
    Slot::LossTerm,
    Slot::ThroughputTerm,
    Slot::OneWayLoss,
    Slot::ThroughputBps,
    Slot::ThroughputRetransmits,
    Slot::ThroughputTcpRtt,
    Slot::ThroughputAge,
];

impl Slot {
    fn bit(self) -> u64 {
        1 << self as u32
    }

    /// Set where the figure is a double's bits: above the bits of the
    /// common case, so that `present` takes 3 bytes then.
    fn raw_bit(self) -> u64 {
        1 << (16 + self as u32)
    }
}

/// Bit of `present`: the loss ratio is there as lost probes over samples.
const LOSS_AS_COUNT: u64 = 1 << 15;
/// Every bit of `present` that means something.
const KNOWN_PRESENT: u64 = {
    let slots = (1 << SLOTS.len()) - 1;
    slots | LOSS_AS_COUNT | (slots << 16)
};

/// The scales a decimal may have, and what a scale adds to its code.
const MIN_SCALE: i32 = -10;
const MAX_SCALE: i32 = 21;
/// A decimal's digits stay exact in a double below this.
const MAX_DIGITS: u64 = 1 << 53;

/// The powers of ten a double holds exactly, 10^0 to 10^22: wider than
/// the scales a decimal may have.
const POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// 10^|scale|, exactly.
fn power_of_ten(scale: i32) -> f64 {
    POWERS_OF_TEN[scale.unsigned_abs() as usize]
}

/// `digits` at `scale` decimals, as a double: digits divided by 10^scale,
/// or multiplied by 10^-scale, so that both operands are exact and the one
/// rounding is the division's or the product's.
fn from_decimal(digits: u64, scale: i32) -> f64 {
    if scale >= 0 {
        digits as f64 / power_of_ten(scale)
    } else {
        digits as f64 * power_of_ten(scale)
    }
}

/// Significant digits past which no decimal is tried: 17 give back any
/// double, but not in the 53 bits a decimal's digits have.
const MOST_DIGITS: i32 = 17;

/// The shortest decimal that gives back `value` bit for bit, as its code;
/// `None` when none does (most computed doubles, negatives, infinities).
fn to_decimal(value: f64) -> Option<u64> {
    if !(value.is_finite() && value >= 0.0) || value.is_sign_negative() {
        return None;
    }
    if value == 0.0 {
        return Some(0);
    }
    // From one significant digit (a step early, should the logarithm round
    // up at a power of ten) to the most a double needs.
    let one_digit = -(value.log10().floor() as i32) - 1;
    let first = one_digit.max(MIN_SCALE);
    let last = (one_digit + MOST_DIGITS).min(MAX_SCALE);
    (first..=last).find_map(|scale| {
        let scaled = if scale >= 0 {
            value * power_of_ten(scale)
        } else {
            value / power_of_ten(scale)
        };
        let digits = scaled.round();
        if !(0.0..MAX_DIGITS as f64).contains(&digits) {
            return None;
        }
        let digits = digits as u64;
        (from_decimal(digits, scale).to_bits() == value.to_bits())
            .then(|| digits << 5 | (scale - MIN_SCALE) as u64)
    })
}

/// A decimal's value from its code.
fn decimal(code: u64) -> Result<f64, CompactError> {
    let scale = (code & 31) as i32 + MIN_SCALE;
    let digits = code >> 5;
    if scale > MAX_SCALE || digits >= MAX_DIGITS {
        return Err(CompactError::BadDecimal(code));
    }
    Ok(from_decimal(digits, scale))
}

/// The figures of a pair as they are packed, one slot after another.
#[derive(Default)]
struct Packer {
    present: u64,
    figures: Vec<u64>,
}

impl Packer {
    fn count(&mut self, slot: Slot, value: Option<u64>) {
        if let Some(value) = value {
            self.present |= slot.bit();
            self.figures.push(value);
        }
    }

    /// A figure as the shortest decimal that gives it back.
    fn figure(&mut self, slot: Slot, value: Option<f64>) {
        self.exact(slot, value, to_decimal);
    }

    /// An age (seconds) as whole milliseconds, where it is some.
    fn millis(&mut self, slot: Slot, value: Option<f64>) {
        self.exact(slot, value, to_millis);
    }

    /// A figure in the form `encode` gives, or its bits where that gives
    /// none.
    fn exact(&mut self, slot: Slot, value: Option<f64>, encode: fn(f64) -> Option<u64>) {
        let Some(value) = value else { return };
        self.present |= slot.bit();
        match encode(value) {
            Some(code) => self.figures.push(code),
            None => {
                self.present |= slot.raw_bit();
                self.figures.push(value.to_bits());
            }
        }
    }
}

/// Milliseconds as the wire's seconds: how the collector turns a pair's
/// age to seconds, so that the seconds come back bit for bit.
fn from_millis(ms: u64) -> Result<f64, CompactError> {
    Ok(ms as f64 / 1_000.0)
}

/// The whole milliseconds that give back `seconds`, if any.
fn to_millis(seconds: f64) -> Option<u64> {
    if !(seconds.is_finite() && seconds >= 0.0 && seconds < MAX_DIGITS as f64 / 1_000.0) {
        return None;
    }
    let ms = (seconds * 1_000.0).round() as u64;
    from_millis(ms)
        .is_ok_and(|back| back.to_bits() == seconds.to_bits())
        .then_some(ms)
}

/// What the figures of a packed pair are read back from, slot by slot.
struct Unpacker<'a> {
    present: u64,
    figures: &'a [u64],
    next: usize,
}

impl Unpacker<'_> {
    /// The next figure as it was packed, if its slot is present: a count
    /// as it is, any other figure for [`Unpacker::exact`] to decode.
    fn count(&mut self, slot: Slot) -> Result<Option<u64>, CompactError> {
        if self.present & slot.bit() == 0 {
            return Ok(None);
        }
        let value = self
            .figures
            .get(self.next)
            .copied()
            .ok_or(CompactError::ShortOfFigures {
                present: self.present,
                figures: self.figures.len(),
            })?;
        self.next += 1;
        Ok(Some(value))
    }

    fn figure(&mut self, slot: Slot) -> Result<Option<f64>, CompactError> {
        self.exact(slot, decimal)
    }

    fn millis(&mut self, slot: Slot) -> Result<Option<f64>, CompactError> {
        self.exact(slot, from_millis)
    }

    fn exact(
        &mut self,
        slot: Slot,
        decode: fn(u64) -> Result<f64, CompactError>,
    ) -> Result<Option<f64>, CompactError> {
        let raw = self.present & slot.raw_bit() != 0;
        self.count(slot)?
            .map(|code| {
                if raw {
                    Ok(f64::from_bits(code))
                } else {
                    decode(code)
                }
            })
            .transpose()
    }
}

/// The quality that `fallback` gives terms: what a compact pair leaves out
/// when the pair's own is the same.
fn quality_of(fallback: &Fallback, terms: &pb::Terms) -> f64 {
    let source = convert::source_from_wire;
    fallback.quality(&Terms::of(
        (terms.delay, source(terms.delay_source)),
        (terms.loss, source(terms.loss_source)),
        (terms.throughput, source(terms.throughput_source)),
        terms.dead,
    ))
}

/// The lost probes behind a loss ratio, when dividing them by `samples`
/// gives back the ratio bit for bit.
fn lost_probes(ratio: f64, samples: u64) -> Option<u64> {
    if samples == 0 || !(0.0..=1.0).contains(&ratio) {
        return None;
    }
    let lost = (ratio * samples as f64).round() as u64;
    ((lost as f64 / samples as f64).to_bits() == ratio.to_bits()).then_some(lost)
}

/// A pair's ends as numbers in the update's node list. A page numbers each
/// compact pair's ends as steps from the pair before it on the page (the
/// first's from node 0): pages go in order, so most steps of the source
/// are 0, which takes no byte at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ends {
    /// The probing node's number.
    pub src: u32,
    /// The probed node's number.
    pub dst: u32,
}

impl Ends {
    /// The steps from `self` to `to`.
    fn steps_to(self, to: Ends) -> (i32, i32) {
        let step =
            |from: u32, to: u32| i32::try_from(i64::from(to) - i64::from(from)).unwrap_or(i32::MAX);
        (step(self.src, to.src), step(self.dst, to.dst))
    }

    /// The ends `steps` from `self`, where both are among `nodes` nodes.
    fn stepped(self, (src, dst): (i32, i32), nodes: usize) -> Result<Ends, CompactError> {
        let end = |from: u32, step: i32| {
            let index = i64::from(from) + i64::from(step);
            u32::try_from(index)
                .ok()
                .filter(|&i| (i as usize) < nodes)
                .ok_or(CompactError::NoSuchNode { index, nodes })
        };
        Ok(Ends {
            src: end(self.src, src)?,
            dst: end(self.dst, dst)?,
        })
    }
}

/// A transport in the flags: 0 for none, else the wire's value plus 1.
const PROBE_SHIFT: u32 = 11;
/// Every bit of the flags that means something.
const KNOWN_FLAGS: u32 = (1 << 13) - 1;

/// `pair` in the compact form, its ends `ends`, the pair before it on the
/// page at `before`; `fallback` is what the follower will make of the
/// update's weights. A pair without terms comes back with zero terms of
/// an unspecified source, and one probed by a transport the wire does not
/// know, with none (a pair cut from a scored matrix is neither).
pub fn pack(pair: &pb::Pair, ends: Ends, before: Ends, fallback: &Fallback) -> pb::CompactPair {
    let terms = pair.terms.unwrap_or_default();
    let mut packer = Packer::default();
    packer.figure(Slot::RttMedian, pair.rtt_median_ms);
    packer.figure(Slot::RttP99, pair.rtt_p99_ms);
    packer.figure(Slot::Jitter, pair.jitter_ms);
    match pair
        .loss_ratio
        .map(|ratio| (ratio, lost_probes(ratio, pair.samples)))
    {
        Some((_, Some(lost))) => {
            packer.present |= LOSS_AS_COUNT;
            packer.count(Slot::LossRatio, Some(lost));
        }
        Some((ratio, None)) => packer.figure(Slot::LossRatio, Some(ratio)),
        None => {}
    }
    packer.count(Slot::Samples, (pair.samples != 0).then_some(pair.samples));
    packer.millis(Slot::Age, Some(pair.age_s));
    let derived = quality_of(fallback, &terms);
    packer.figure(
        Slot::Quality,
        (derived.to_bits() != pair.quality.to_bits()).then_some(pair.quality),
    );
    let nonzero = |term: f64| (term.to_bits() != 0).then_some(term);
    packer.figure(Slot::DelayTerm, nonzero(terms.delay));
    packer.figure(Slot::LossTerm, nonzero(terms.loss));
    packer.figure(Slot::ThroughputTerm, nonzero(terms.throughput));
    packer.figure(Slot::OneWayLoss, pair.one_way_loss_ratio);
    packer.figure(Slot::ThroughputBps, pair.throughput_bps);
    packer.count(
        Slot::ThroughputRetransmits,
        pair.throughput_retransmits.map(u64::from),
    );
    packer.figure(Slot::ThroughputTcpRtt, pair.throughput_tcp_rtt_ms);
    packer.millis(Slot::ThroughputAge, pair.throughput_age_s);
    let source_bits = |source: i32| u32::try_from(source).unwrap_or(0) & 7;
    let probe = pair
        .probe
        .and_then(|probe| u32::try_from(probe).ok())
        .filter(|&probe| probe < 3)
        .map_or(0, |probe| probe + 1);
    let (src_step, dst_step) = before.steps_to(ends);
    pb::CompactPair {
        src_step,
        dst_step,
        present: packer.present,
        figures: packer.figures,
        flags: source_bits(terms.delay_source)
            | source_bits(terms.loss_source) << 3
            | source_bits(terms.throughput_source) << 6
            | u32::from(terms.dead) << 9
            | u32::from(pair.stale) << 10
            | probe << PROBE_SHIFT,
        filtered: pair.filtered.clone(),
    }
}

/// The pair that [`pack`] was given and its ends, the pair before it on
/// the page at `before`, its ends named from `nodes` and its network
/// `network`; `fallback` is what the update's weights make.
pub fn unpack(
    compact: &pb::CompactPair,
    before: Ends,
    nodes: &[pb::Node],
    network: &str,
    fallback: &Fallback,
) -> Result<(pb::Pair, Ends), CompactError> {
    let ends = before.stepped((compact.src_step, compact.dst_step), nodes.len())?;
    let name = |index: u32| nodes[index as usize].name.clone();
    let present = compact.present;
    if present & !KNOWN_PRESENT != 0 {
        return Err(CompactError::UnknownBits(present));
    }
    let mut figures = Unpacker {
        present,
        figures: &compact.figures,
        next: 0,
    };
    let rtt_median_ms = figures.figure(Slot::RttMedian)?;
    let rtt_p99_ms = figures.figure(Slot::RttP99)?;
    let jitter_ms = figures.figure(Slot::Jitter)?;
    let loss = if present & LOSS_AS_COUNT != 0 {
        figures.count(Slot::LossRatio)?.map(Loss::Lost)
    } else {
        figures.figure(Slot::LossRatio)?.map(Loss::Ratio)
    };
    let samples = figures.count(Slot::Samples)?.unwrap_or(0);
    let loss_ratio = loss.map(|loss| match loss {
        Loss::Lost(lost) => lost as f64 / samples as f64,
        Loss::Ratio(ratio) => ratio,
    });
    let age_s = figures.millis(Slot::Age)?.unwrap_or(0.0);
    let quality = figures.figure(Slot::Quality)?;
    let flags = compact.flags;
    let source = |shift: u32| {
        let value = ((flags >> shift) & 7) as i32;
        pb::Source::try_from(value)
            .map(i32::from)
            .map_err(|_| CompactError::BadFlags(flags))
    };
    let terms = pb::Terms {
        delay: figures.figure(Slot::DelayTerm)?.unwrap_or(0.0),
        loss: figures.figure(Slot::LossTerm)?.unwrap_or(0.0),
        throughput: figures.figure(Slot::ThroughputTerm)?.unwrap_or(0.0),
        delay_source: source(0)?,
        loss_source: source(3)?,
        throughput_source: source(6)?,
        dead: flags & 1 << 9 != 0,
    };
    if flags & !KNOWN_FLAGS != 0 {
        return Err(CompactError::BadFlags(flags));
    }
    let probe = match flags >> PROBE_SHIFT {
        0 => None,
        probe => Some(probe as i32 - 1),
    };
    let pair = pb::Pair {
        src: name(ends.src),
        dst: name(ends.dst),
        rtt_median_ms,
        rtt_p99_ms,
        jitter_ms,
        loss_ratio,
        samples,
        age_s,
        quality: quality.unwrap_or_else(|| quality_of(fallback, &terms)),
        terms: Some(terms),
        stale: flags & 1 << 10 != 0,
        one_way_loss_ratio: figures.figure(Slot::OneWayLoss)?,
        throughput_bps: figures.figure(Slot::ThroughputBps)?,
        throughput_retransmits: figures
            .count(Slot::ThroughputRetransmits)?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        throughput_tcp_rtt_ms: figures.figure(Slot::ThroughputTcpRtt)?,
        throughput_age_s: figures.millis(Slot::ThroughputAge)?,
        probe,
        filtered: compact.filtered.clone(),
        network: network.to_owned(),
    };
    if figures.next != compact.figures.len() {
        return Err(CompactError::TooManyFigures {
            present,
            figures: compact.figures.len(),
        });
    }
    Ok((pair, ends))
}

/// A loss ratio as it was packed.
enum Loss {
    Lost(u64),
    Ratio(f64),
}

#[cfg(test)]
mod tests {
    use super::*;
    use netaware_core::rings::seven_digits;
    use proptest::prelude::*;
    use prost::Message;

    fn node(i: usize) -> pb::Node {
        pb::Node {
            name: format!("node-{i:05}"),
            ..pb::Node::default()
        }
    }

    /// A pair as a collector of 5,000 nodes sends it: figures kept from
    /// f32 windows at seven digits, a loss ratio of counted probes, the
    /// quality its weights make of its terms.
    fn measured(rtt: f32, lost: u64, samples: u64) -> pb::Pair {
        let fallback = Fallback::default();
        let terms = pb::Terms {
            delay: fallback.delay_term(seven_digits(f64::from(rtt))),
            loss: 1.0 - lost as f64 / samples as f64 * 20.0,
            throughput: 0.4,
            delay_source: pb::Source::Measured.into(),
            loss_source: pb::Source::Measured.into(),
            throughput_source: pb::Source::ZoneAverage.into(),
            dead: false,
        };
        pb::Pair {
            src: node(1234).name,
            dst: node(4321).name,
            rtt_median_ms: Some(seven_digits(f64::from(rtt))),
            rtt_p99_ms: Some(seven_digits(f64::from(rtt * 3.1))),
            jitter_ms: Some(seven_digits(f64::from(rtt / 7.0))),
            loss_ratio: Some(lost as f64 / samples as f64),
            samples,
            age_s: 3.217,
            quality: quality_of(&fallback, &terms),
            terms: Some(terms),
            probe: Some(pb::Transport::Icmp.into()),
            network: "primary".to_owned(),
            ..pb::Pair::default()
        }
    }

    fn nodes() -> Vec<pb::Node> {
        (0..5000).map(node).collect()
    }

    const ENDS: Ends = Ends {
        src: 1234,
        dst: 4321,
    };
    const BEFORE: Ends = Ends { src: 1234, dst: 17 };

    fn round_trip(pair: &pb::Pair, fallback: &Fallback) -> pb::Pair {
        let packed = pack(pair, ENDS, BEFORE, fallback);
        let (back, ends) = unpack(&packed, BEFORE, &nodes(), &pair.network, fallback).unwrap();
        assert_eq!(ends, ENDS);
        back
    }

    #[test]
    fn a_measured_pair_comes_back_bit_for_bit_in_under_half_the_bytes() {
        let fallback = Fallback::default();
        let pair = measured(0.234_567_8, 3, 640);
        let packed = pack(&pair, ENDS, BEFORE, &fallback);
        assert_eq!(
            round_trip(&pair, &fallback).encode_to_vec(),
            pair.encode_to_vec()
        );
        // The quality is left out: the weights give it back.
        assert_eq!(packed.present & Slot::Quality.bit(), 0);
        assert_ne!(packed.present & LOSS_AS_COUNT, 0);
        let (full, compact) = (pair.encoded_len(), packed.encoded_len());
        assert!(compact * 2 < full, "{compact} bytes of {full}");
    }

    #[test]
    fn a_quality_the_weights_do_not_give_goes_along() {
        let fallback = Fallback::default();
        let mut pair = measured(1.5, 0, 64);
        pair.quality = 0.123_456_789_012_345;
        let packed = pack(&pair, ENDS, BEFORE, &fallback);
        assert_ne!(packed.present & Slot::Quality.bit(), 0);
        assert_eq!(round_trip(&pair, &fallback), pair);
    }

    #[test]
    fn decimals_are_the_shortest_that_give_back_the_double() {
        assert_eq!(to_decimal(0.25), Some(25 << 5 | 12));
        assert_eq!(to_decimal(5000.0), Some(5 << 5 | 7));
        assert_eq!(to_decimal(0.0), Some(0));
        assert_eq!(to_decimal(-1.0), None);
        assert_eq!(to_decimal(-0.0), None);
        assert_eq!(to_decimal(f64::NAN), None);
        assert_eq!(to_decimal(f64::MIN_POSITIVE), None);
        assert_eq!(to_decimal(1e300), None);
        for x in [0.25, 5000.0, 0.0, 0.234_567_8, 9.123e9, 1e-9, 1.0 / 3.0] {
            assert_eq!(
                decimal(to_decimal(x).unwrap()).unwrap().to_bits(),
                x.to_bits()
            );
        }
    }

    #[test]
    fn ends_past_the_node_list_and_short_figures_are_errors() {
        let fallback = Fallback::default();
        let ends = Ends { src: 7, dst: 1 };
        let packed = pack(&measured(0.5, 0, 10), ends, Ends::default(), &fallback);
        let few = [node(0), node(1)];
        assert_eq!(
            unpack(&packed, Ends::default(), &few, "primary", &fallback),
            Err(CompactError::NoSuchNode { index: 7, nodes: 2 })
        );
        // Steps below node 0 name no node either.
        assert_eq!(
            Ends::default().stepped((-1, 0), 9),
            Err(CompactError::NoSuchNode {
                index: -1,
                nodes: 9
            })
        );
        let short = pb::CompactPair {
            figures: packed.figures[1..].to_vec(),
            ..packed.clone()
        };
        assert!(matches!(
            unpack(&short, Ends::default(), &nodes(), "primary", &fallback),
            Err(CompactError::ShortOfFigures { .. })
        ));
        let long = pb::CompactPair {
            figures: [packed.figures.clone(), vec![1]].concat(),
            ..packed
        };
        assert!(matches!(
            unpack(&long, Ends::default(), &nodes(), "primary", &fallback),
            Err(CompactError::TooManyFigures { .. })
        ));
    }

    /// Any double, as bits: NaNs, infinities, negatives and subnormals too.
    fn any_figure() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            any::<f32>().prop_map(|x| seven_digits(f64::from(x))),
            (0u64..10_000_000).prop_map(|ms| ms as f64 / 1000.0),
            any::<f64>(),
        ]
    }

    fn any_terms() -> impl Strategy<Value = pb::Terms> {
        (
            any_figure(),
            any_figure(),
            any_figure(),
            0i32..5,
            0i32..5,
            0i32..5,
            any::<bool>(),
        )
            .prop_map(|(delay, loss, throughput, ds, ls, ts, dead)| pb::Terms {
                delay,
                loss,
                throughput,
                delay_source: ds,
                loss_source: ls,
                throughput_source: ts,
                dead,
            })
    }

    prop_compose! {
        fn any_pair()(
            rtt in proptest::option::of(any_figure()),
            p99 in proptest::option::of(any_figure()),
            jitter in proptest::option::of(any_figure()),
            (lost, samples) in (0u64..1000, 0u64..1000),
            odd_loss in proptest::option::of(any_figure()),
            age in any_figure(),
            terms in any_terms(),
            derived_quality in any::<bool>(),
            quality in any_figure(),
            stale in any::<bool>(),
            one_way in proptest::option::of(any_figure()),
            throughput in proptest::option::of((any_figure(), proptest::option::of(any::<u32>()), proptest::option::of(any_figure()), any_figure())),
            probe in proptest::option::of(0i32..3),
            filtered in prop::collection::vec(0i32..4, 0..3),
        ) -> pb::Pair {
            let loss_ratio = match odd_loss {
                Some(ratio) => Some(ratio),
                None => (samples > 0).then(|| lost.min(samples) as f64 / samples as f64),
            };
            pb::Pair {
                src: node(1234).name,
                dst: node(4321).name,
                rtt_median_ms: rtt,
                rtt_p99_ms: p99,
                jitter_ms: jitter,
                loss_ratio,
                samples,
                age_s: age,
                quality: if derived_quality { quality_of(&Fallback::default(), &terms) } else { quality },
                terms: Some(terms),
                stale,
                one_way_loss_ratio: one_way,
                throughput_bps: throughput.map(|t| t.0),
                throughput_retransmits: throughput.and_then(|t| t.1),
                throughput_tcp_rtt_ms: throughput.and_then(|t| t.2),
                throughput_age_s: throughput.map(|t| t.3),
                probe,
                filtered,
                network: "rail-3".to_owned(),
            }
        }
    }

    proptest! {
        /// Whatever a pair holds, it unpacks to the same bytes.
        #[test]
        fn every_pair_unpacks_to_the_same_bytes(pair in any_pair()) {
            let fallback = Fallback::default();
            prop_assert_eq!(round_trip(&pair, &fallback).encode_to_vec(), pair.encode_to_vec());
        }

        /// Whatever comes off the wire, unpacking answers and never panics.
        #[test]
        fn any_compact_pair_unpacks_or_is_refused(
            src_step in any::<i32>(),
            dst_step in any::<i32>(),
            before in (0u32..6000, 0u32..6000),
            present in any::<u64>(),
            figures in prop::collection::vec(any::<u64>(), 0..20),
            flags in any::<u32>(),
        ) {
            let compact = pb::CompactPair { src_step, dst_step, present, figures, flags, ..pb::CompactPair::default() };
            let before = Ends { src: before.0, dst: before.1 };
            if let Ok((pair, ends)) = unpack(&compact, before, &nodes(), "primary", &Fallback::default()) {
                prop_assert!(pair.terms.is_some());
                prop_assert!(ends.src < 5000 && ends.dst < 5000);
            }
        }
    }
}
