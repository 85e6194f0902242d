//! A small causal transformer language model, written with burn's own modules, and the LoRA
//! adapter put on it with burn's module system.

use burn::module::{Lora, ParamGroup};
use burn::nn::attention::generate_autoregressive_mask;
use burn::nn::loss::{CrossEntropyLoss, CrossEntropyLossConfig};
use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::prelude::*;

use crate::corpus::SEQ_LEN;

/// Width of the residual stream.
pub const D_MODEL: usize = 64;
/// Attention heads per layer.
pub const HEADS: usize = 4;
/// Width of the (frozen) feed-forward layers.
pub const D_FF: usize = 256;
/// Transformer blocks.
pub const LAYERS: usize = 2;

/// Token and position embeddings, pre-norm transformer blocks under a causal mask, and a linear
/// head over the vocabulary.
#[derive(Module, Debug)]
pub struct LanguageModel {
    tokens: Embedding,
    positions: Embedding,
    blocks: TransformerEncoder,
    head: Linear,
}

impl LanguageModel {
    /// A freshly initialised model (burn's initialisers draw from `device.seed(..)`).
    pub fn new(vocab: usize, device: &Device) -> LanguageModel {
        LanguageModel {
            tokens: EmbeddingConfig::new(vocab, D_MODEL).init(device),
            positions: EmbeddingConfig::new(SEQ_LEN, D_MODEL).init(device),
            // No dropout: the run is deterministic, and the model is too small to need it.
            blocks: TransformerEncoderConfig::new(D_MODEL, D_FF, HEADS, LAYERS)
                .with_dropout(0.0)
                .with_norm_first(true)
                .init(device),
            head: LinearConfig::new(D_MODEL, vocab).init(device),
        }
    }

    /// Logits `[batch, SEQ_LEN, vocab]` for tokens `[batch, SEQ_LEN]`; position `t` sees only
    /// positions `0..=t`.
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let [batch, seq] = tokens.dims();
        let device = tokens.device();
        let positions = Tensor::<1, Int>::arange(0..seq as i64, &device)
            .reshape([1, seq])
            .expand([batch, seq]);
        let x = self.tokens.forward(tokens) + self.positions.forward(positions);
        let mask = generate_autoregressive_mask(batch, seq, &device);
        let x = self
            .blocks
            .forward(TransformerEncoderInput::new(x).mask_attn(mask));
        self.head.forward(x)
    }

    /// Mean next-token cross-entropy (nats per character) of `inputs` against `targets`, both
    /// `[batch, SEQ_LEN]`.
    pub fn loss(&self, inputs: Tensor<2, Int>, targets: Tensor<2, Int>) -> Tensor<1> {
        let [batch, seq] = inputs.dims();
        let logits = self.forward(inputs);
        let vocab = logits.dims()[2];
        cross_entropy(&logits.device()).forward(
            logits.reshape([batch * seq, vocab]),
            targets.reshape([batch * seq]),
        )
    }

    /// The fine-tuning model: every pretrained weight frozen, and a trainable rank-`rank` LoRA
    /// adapter (`W = W0 + alpha/rank * A B`, `A` random, `B` zero) on the query, key, value and
    /// output projections of every attention layer.
    ///
    /// How the freeze is done: `Module::freeze` turns off gradient tracking for every
    /// parameter of the tree (and the module-owned training flags, such as dropout's);
    /// `Module::apply_lora` then re-parameterises each 2-D weight in the parameter group as its
    /// frozen base plus two new parameters, `A` and `B`, which are the only tensors that require
    /// gradients. A backward pass therefore yields gradients for the adapters alone, which the
    /// training loop checks on its first step.
    pub fn with_lora(self, rank: usize, alpha: f64) -> LanguageModel {
        let attention =
            ParamGroup::from_regex(r"^blocks\.layers\.\d+\.mha\.(query|key|value|output)\.weight$")
                .expect("a valid regex");
        self.freeze()
            .apply_lora(Lora::new(rank, alpha).set_param_group(attention))
    }
}

fn cross_entropy(device: &Device) -> CrossEntropyLoss {
    CrossEntropyLossConfig::new().init(device)
}
