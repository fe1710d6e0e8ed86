//! Register sets: SGPRs s0..s105, VGPRs v0..v511, AGPRs a0..a255, TTMP0..15 and special
//! registers. Scalar operand encodings per family come from `isa-tables/sregs/<family>.tsv`
//! (LLVM 22 disassembly of every 8-bit scalar source value).

/// Special (non-SGPR-file) registers tracked by [`RegSet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialReg {
    VccLo,
    VccHi,
    ExecLo,
    ExecHi,
    M0,
    Scc,
    FlatScratchLo,
    FlatScratchHi,
    XnackMaskLo,
    XnackMaskHi,
    Mode,
}

impl SpecialReg {
    /// Every special register, in bit order.
    pub const ALL: [SpecialReg; 11] = [
        SpecialReg::VccLo,
        SpecialReg::VccHi,
        SpecialReg::ExecLo,
        SpecialReg::ExecHi,
        SpecialReg::M0,
        SpecialReg::Scc,
        SpecialReg::FlatScratchLo,
        SpecialReg::FlatScratchHi,
        SpecialReg::XnackMaskLo,
        SpecialReg::XnackMaskHi,
        SpecialReg::Mode,
    ];

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// A set of registers (bitsets, 16-bit halves count as the whole 32-bit register).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RegSet {
    sgpr: [u64; 2],
    vgpr: [u64; 8],
    agpr: [u64; 4],
    ttmp: u16,
    special: u16,
}

/// One member of a [`RegSet`], as yielded by [`RegSet::iter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reg {
    Sgpr(u16),
    Vgpr(u16),
    Agpr(u16),
    Ttmp(u16),
    Special(SpecialReg),
}

fn set(bits: &mut [u64], n: usize) {
    if let Some(w) = bits.get_mut(n / 64) {
        *w |= 1 << (n % 64);
    }
}

fn get(bits: &[u64], n: usize) -> bool {
    bits.get(n / 64).is_some_and(|w| w & (1 << (n % 64)) != 0)
}

fn max_bit(bits: &[u64]) -> Option<u16> {
    bits.iter()
        .enumerate()
        .rev()
        .find(|(_, w)| **w != 0)
        .map(|(i, w)| (i * 64 + 63 - w.leading_zeros() as usize) as u16)
}

impl RegSet {
    /// The empty set.
    pub fn new() -> RegSet {
        RegSet::default()
    }

    /// Adds SGPR `n` (0..=105); out-of-range numbers are ignored.
    pub fn add_sgpr(&mut self, n: u16) {
        if n < 106 {
            set(&mut self.sgpr, usize::from(n));
        }
    }

    /// Adds VGPR `n` (0..=511).
    pub fn add_vgpr(&mut self, n: u16) {
        set(&mut self.vgpr, usize::from(n));
    }

    /// Adds AGPR `n` (0..=255).
    pub fn add_agpr(&mut self, n: u16) {
        set(&mut self.agpr, usize::from(n));
    }

    /// Adds trap temporary `ttmp<n>` (0..=15).
    pub fn add_ttmp(&mut self, n: u16) {
        if n < 16 {
            self.ttmp |= 1 << n;
        }
    }

    /// Adds a special register.
    pub fn add(&mut self, r: SpecialReg) {
        self.special |= r.bit();
    }

    pub fn contains_sgpr(&self, n: u16) -> bool {
        get(&self.sgpr, usize::from(n))
    }

    pub fn contains_vgpr(&self, n: u16) -> bool {
        get(&self.vgpr, usize::from(n))
    }

    pub fn contains_agpr(&self, n: u16) -> bool {
        get(&self.agpr, usize::from(n))
    }

    pub fn contains_ttmp(&self, n: u16) -> bool {
        n < 16 && self.ttmp & (1 << n) != 0
    }

    pub fn contains(&self, r: SpecialReg) -> bool {
        self.special & r.bit() != 0
    }

    /// The SGPRs of the set as a bit mask: bit `n` is `s<n>` (0..=105; VCC, M0, EXEC and the other
    /// special registers are not included).
    pub fn sgpr_bits(&self) -> u128 {
        u128::from(self.sgpr[0]) | (u128::from(self.sgpr[1]) << 64)
    }

    /// Highest SGPR number in the set.
    pub fn max_sgpr(&self) -> Option<u16> {
        max_bit(&self.sgpr)
    }

    /// Highest VGPR number in the set.
    pub fn max_vgpr(&self) -> Option<u16> {
        max_bit(&self.vgpr)
    }

    /// Highest AGPR number in the set.
    pub fn max_agpr(&self) -> Option<u16> {
        max_bit(&self.agpr)
    }

    pub fn is_empty(&self) -> bool {
        *self == RegSet::default()
    }

    /// Set union.
    pub fn union(&self, o: &RegSet) -> RegSet {
        let mut r = *self;
        r.union_with(o);
        r
    }

    /// In-place union.
    pub fn union_with(&mut self, o: &RegSet) {
        self.sgpr.iter_mut().zip(o.sgpr).for_each(|(a, b)| *a |= b);
        self.vgpr.iter_mut().zip(o.vgpr).for_each(|(a, b)| *a |= b);
        self.agpr.iter_mut().zip(o.agpr).for_each(|(a, b)| *a |= b);
        self.ttmp |= o.ttmp;
        self.special |= o.special;
    }

    /// Set intersection.
    pub fn intersection(&self, o: &RegSet) -> RegSet {
        let mut r = *self;
        r.sgpr.iter_mut().zip(o.sgpr).for_each(|(a, b)| *a &= b);
        r.vgpr.iter_mut().zip(o.vgpr).for_each(|(a, b)| *a &= b);
        r.agpr.iter_mut().zip(o.agpr).for_each(|(a, b)| *a &= b);
        r.ttmp &= o.ttmp;
        r.special &= o.special;
        r
    }

    /// Members in a fixed order: SGPRs, VGPRs, AGPRs, TTMPs, specials.
    pub fn iter(&self) -> impl Iterator<Item = Reg> + '_ {
        let s = (0..106u16)
            .filter(|n| self.contains_sgpr(*n))
            .map(Reg::Sgpr);
        let v = (0..512u16)
            .filter(|n| self.contains_vgpr(*n))
            .map(Reg::Vgpr);
        let a = (0..256u16)
            .filter(|n| self.contains_agpr(*n))
            .map(Reg::Agpr);
        let t = (0..16u16).filter(|n| self.contains_ttmp(*n)).map(Reg::Ttmp);
        let x = SpecialReg::ALL
            .into_iter()
            .filter(|r| self.contains(*r))
            .map(Reg::Special);
        s.chain(v).chain(a).chain(t).chain(x)
    }

    /// Adds the register(s) a scalar operand encoding names, using the family's operand names
    /// (`sregs`); `width` consecutive encodings. Constants add nothing; `src_scc`, `src_vccz`,
    /// `src_execz` add SCC, VCC and EXEC.
    pub(crate) fn add_scalar(&mut self, sregs: &[&str; 256], enc: u16, width: u8) {
        let table = scalar_table(sregs);
        for i in 0..u16::from(width.max(1)) {
            let k = usize::from(enc + i);
            if k >= 256 {
                return;
            }
            match table {
                Some(t) => self.union_with(&t[k]),
                None => self.add_scalar_name(sregs[k]),
            }
        }
    }

    fn add_scalar_name(&mut self, name: &str) {
        if let Some(n) = name.strip_prefix("ttmp").and_then(|n| n.parse().ok()) {
            self.add_ttmp(n);
        } else if let Some(n) = name.strip_prefix('s').and_then(|n| n.parse().ok()) {
            self.add_sgpr(n);
        } else {
            match name {
                "vcc_lo" => self.add(SpecialReg::VccLo),
                "vcc_hi" => self.add(SpecialReg::VccHi),
                "exec_lo" => self.add(SpecialReg::ExecLo),
                "exec_hi" => self.add(SpecialReg::ExecHi),
                "m0" => self.add(SpecialReg::M0),
                "flat_scratch_lo" => self.add(SpecialReg::FlatScratchLo),
                "flat_scratch_hi" => self.add(SpecialReg::FlatScratchHi),
                "xnack_mask_lo" => self.add(SpecialReg::XnackMaskLo),
                "xnack_mask_hi" => self.add(SpecialReg::XnackMaskHi),
                "src_scc" => self.add(SpecialReg::Scc),
                "src_vccz" => {
                    self.add(SpecialReg::VccLo);
                    self.add(SpecialReg::VccHi)
                }
                "src_execz" => {
                    self.add(SpecialReg::ExecLo);
                    self.add(SpecialReg::ExecHi)
                }
                _ => {}
            }
        }
    }
}

/// The registers each scalar operand encoding of one operand-name table names (the sets
/// [`RegSet::add_scalar`] adds), parsed once per distinct table instead of per operand.
fn scalar_table(sregs: &[&str; 256]) -> Option<&'static [RegSet; 256]> {
    static TABLES: std::sync::OnceLock<Vec<(usize, Box<[RegSet; 256]>)>> =
        std::sync::OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        let mut out: Vec<(usize, Box<[RegSet; 256]>)> = Vec::new();
        for t in crate::tables::TARGETS.iter() {
            let key = t.sregs as *const [&str; 256] as usize;
            if out.iter().any(|(k, _)| *k == key) {
                continue;
            }
            let mut sets = Box::new([RegSet::new(); 256]);
            for (set, name) in sets.iter_mut().zip(t.sregs.iter()) {
                set.add_scalar_name(name);
            }
            out.push((key, sets));
        }
        out
    });
    let key = sregs as *const [&str; 256] as usize;
    tables.iter().find(|(k, _)| *k == key).map(|(_, t)| &**t)
}
