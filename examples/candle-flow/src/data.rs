//! The data the run generates for itself: points of the plane in [`CLASSES`] classes, each class
//! a cluster on a ring, and the rectified-flow pairs built from them.
//!
//! A rectified flow learns the straight path from noise `x0 ~ N(0, I)` to a data point `x1`:
//! at a time `t` in [0, 1] the model sees `x_t = (1 - t) x0 + t x1` (with the class, its
//! "prompt") and predicts the velocity `x1 - x0`. That is flux1's training objective on images;
//! here the images are points, so the whole run takes seconds on a CPU.

use candle_core::{Device, Result, Tensor};

/// Classes: the conditioning the model gets, as a one-hot vector.
pub const CLASSES: usize = 8;
/// The model's input: `x_t` (2), `t` (1) and the class (one-hot).
pub const INPUT: usize = 2 + 1 + CLASSES;
/// Radius of the ring the class centres lie on.
const RING: f32 = 2.0;
/// Standard deviation of each cluster around its centre.
const SPREAD: f32 = 0.15;

/// A seeded generator of our own (SplitMix64): candle's CPU random tensors cannot be seeded
/// (`Device::set_seed` fails on the CPU), and the run must repeat exactly for the same seed.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Standard normal (Box–Muller; one of the pair is dropped, which keeps the generator's
    /// state the only state).
    pub fn normal(&mut self) -> f32 {
        let u = 1.0 - self.uniform(); // (0, 1]: the logarithm stays finite
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Fisher–Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// Labelled data points (`x1` of the flow, and its class).
pub struct Points {
    xy: Vec<[f32; 2]>,
    class: Vec<usize>,
}

impl Points {
    pub fn generate(n: usize, rng: &mut Rng) -> Points {
        let mut points = Points {
            xy: Vec::with_capacity(n),
            class: Vec::with_capacity(n),
        };
        for _ in 0..n {
            let class = rng.below(CLASSES);
            let angle = std::f32::consts::TAU * class as f32 / CLASSES as f32;
            let x = RING * angle.cos() + SPREAD * rng.normal();
            let y = RING * angle.sin() + SPREAD * rng.normal();
            points.xy.push([x, y]);
            points.class.push(class);
        }
        points
    }

    pub fn len(&self) -> usize {
        self.xy.len()
    }

    /// The model's inputs and the velocities it should predict for the points `indices`, each
    /// with the noise and the time `noise_and_time` gives it.
    pub fn flow_batch(
        &self,
        indices: &[usize],
        mut noise_and_time: impl FnMut(usize) -> ([f32; 2], f32),
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let mut inputs = Vec::with_capacity(indices.len() * INPUT);
        let mut velocities = Vec::with_capacity(indices.len() * 2);
        for (row, &i) in indices.iter().enumerate() {
            let ([n0, n1], t) = noise_and_time(row);
            let [x, y] = self.xy[i];
            inputs.extend([(1.0 - t) * n0 + t * x, (1.0 - t) * n1 + t * y, t]);
            inputs.extend((0..CLASSES).map(|c| f32::from(u8::from(c == self.class[i]))));
            velocities.extend([x - n0, y - n1]);
        }
        let rows = indices.len();
        Ok((
            Tensor::from_vec(inputs, (rows, INPUT), device)?,
            Tensor::from_vec(velocities, (rows, 2), device)?,
        ))
    }
}

/// The held-out evaluation set: points the training never sees, each with a fixed noise and a
/// fixed time (evenly spaced over (0, 1), as flux1's validation loss averages over fixed
/// timesteps), so that every evaluation measures the same thing.
pub struct EvalSet {
    points: Points,
    noise: Vec<[f32; 2]>,
}

impl EvalSet {
    pub fn generate(n: usize, rng: &mut Rng) -> EvalSet {
        let points = Points::generate(n, rng);
        let noise = (0..n).map(|_| [rng.normal(), rng.normal()]).collect();
        EvalSet { points, noise }
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// The inputs and velocities of the points `start..end`.
    pub fn batch(&self, start: usize, end: usize, device: &Device) -> Result<(Tensor, Tensor)> {
        let indices: Vec<usize> = (start..end).collect();
        let n = self.len() as f32;
        self.points.flow_batch(
            &indices,
            |row| {
                let i = start + row;
                (self.noise[i], (i as f32 + 0.5) / n)
            },
            device,
        )
    }
}
