//! The velocity field: a small MLP from `(x_t, t, class)` to the velocity `x1 - x0`, its
//! weights in a candle-nn `VarMap` (what the optimizer updates), and the global gradient-norm
//! clipping the flux1 rules fix at 1.0 (candle-nn's optimizers have none).

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Module, Result, Tensor, Var};
use candle_nn::{linear, Linear, VarBuilder, VarMap};

use crate::data::{Rng, INPUT};

/// Width of the two hidden layers.
pub const HIDDEN: usize = 64;

pub struct VelocityField {
    layers: [Linear; 3],
}

impl VelocityField {
    /// The model, its weights registered in `vars` and drawn from `rng`.
    pub fn new(vars: &VarMap, rng: &mut Rng, device: &Device) -> Result<VelocityField> {
        let vb = VarBuilder::from_varmap(vars, DType::F32, device);
        let layers = [
            linear(INPUT, HIDDEN, vb.pp("in"))?,
            linear(HIDDEN, HIDDEN, vb.pp("hidden"))?,
            linear(HIDDEN, 2, vb.pp("out"))?,
        ];
        reinitialise(vars, rng)?;
        Ok(VelocityField { layers })
    }

    /// The predicted velocities, one row per input row.
    pub fn forward(&self, inputs: &Tensor) -> Result<Tensor> {
        let [first, hidden, out] = &self.layers;
        let h = first.forward(inputs)?.silu()?;
        let h = hidden.forward(&h)?.silu()?;
        out.forward(&h)
    }

    /// Mean squared error of the predicted velocities: flux1's training and validation loss.
    pub fn loss(&self, inputs: &Tensor, velocities: &Tensor) -> Result<Tensor> {
        candle_nn::loss::mse(&self.forward(inputs)?, velocities)
    }
}

/// Draws every weight again from the run's own generator, in name order, with the
/// distributions candle-nn's `linear` uses (Kaiming-normal weights, uniform biases within
/// `1/sqrt(fan_in)`): candle draws them from an unseeded CPU generator, and the run must repeat.
fn reinitialise(vars: &VarMap, rng: &mut Rng) -> Result<()> {
    let data = vars
        .data()
        .lock()
        .map_err(|_| candle_core::Error::Msg("the VarMap's lock is poisoned".to_owned()))?;
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    for name in names {
        let var = &data[name];
        let shape = var.shape().clone();
        let values: Vec<f32> = if name.ends_with("weight") {
            // (out, in): Kaiming normal for the ReLU family (SiLU here), std = sqrt(2 / in).
            let std = (2.0 / shape.dims()[1] as f32).sqrt();
            (0..shape.elem_count())
                .map(|_| std * rng.normal())
                .collect()
        } else {
            // The bias of a layer: its fan-in is the weight's, the width of the layer before.
            let fan_in = data[&name.replace("bias", "weight")].dims()[1] as f32;
            let bound = 1.0 / fan_in.sqrt();
            (0..shape.elem_count())
                .map(|_| bound * (2.0 * rng.uniform() - 1.0))
                .collect()
        };
        var.set(&Tensor::from_vec(values, shape, var.device())?)?;
    }
    Ok(())
}

/// Scales the gradients down so that their global L2 norm is at most `max_norm`; returns the
/// norm before clipping.
pub fn clip_grad_norm(vars: &[Var], grads: &mut GradStore, max_norm: f64) -> Result<f64> {
    let mut squares = 0.0;
    for var in vars {
        if let Some(g) = grads.get(var) {
            squares += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
        }
    }
    let norm = squares.sqrt();
    if norm > max_norm {
        let scale = max_norm / norm;
        for var in vars {
            if let Some(g) = grads.remove(var) {
                grads.insert(var, (g * scale)?);
            }
        }
    }
    Ok(norm)
}
