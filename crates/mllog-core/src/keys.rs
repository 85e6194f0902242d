//! Every key, benchmark name, metadata key and value constant of `mlperf_logging` 4.1.68
//! (`mlperf_logging/mllog/constants.py`, 173 constants), plus the keys that the compliance rules
//! check but that have no constant there ([`LORA_RANK`], [`EVALUATION_FREQUENCY`], ...).
//!
//! Names follow the Python constants (so code ports over one to one); the values are the exact
//! strings written into logs. [`Benchmark`] is the typed form of the benchmark names.
//!
//! The section comments mirror `constants.py`, which keeps values alphabetical per section.

// Constant values - log settings
/// `"mllog_default"` (`mllog.constants.DEFAULT_LOGGER_NAME`).
pub const DEFAULT_LOGGER_NAME: &str = "mllog_default";
/// `""` (`mllog.constants.DEFAULT_NAMESPACE`).
pub const DEFAULT_NAMESPACE: &str = "";

// Constant values - log event type
/// `"INTERVAL_END"` (`mllog.constants.INTERVAL_END`).
pub const INTERVAL_END: &str = "INTERVAL_END";
/// `"INTERVAL_START"` (`mllog.constants.INTERVAL_START`).
pub const INTERVAL_START: &str = "INTERVAL_START";
/// `"POINT_IN_TIME"` (`mllog.constants.POINT_IN_TIME`).
pub const POINT_IN_TIME: &str = "POINT_IN_TIME";

// Constant values - submission division
/// `"closed"` (`mllog.constants.CLOSED`).
pub const CLOSED: &str = "closed";
/// `"open"` (`mllog.constants.OPEN`).
pub const OPEN: &str = "open";

// Constant values - submission status
/// `"onprem"` (`mllog.constants.ONPREM`).
pub const ONPREM: &str = "onprem";
/// `"cloud"` (`mllog.constants.CLOUD`).
pub const CLOUD: &str = "cloud";
/// `"research"` (`mllog.constants.RESEARCH`).
pub const RESEARCH: &str = "research";

// Constant values - benchmark name
/// `"dlrm_dcnv2"` (`mllog.constants.DLRM_DCNv2`).
pub const DLRM_DCNV2: &str = "dlrm_dcnv2";
/// `"gnmt"` (`mllog.constants.GNMT`).
pub const GNMT: &str = "gnmt";
/// `"maskrcnn"` (`mllog.constants.MASKRCNN`).
pub const MASKRCNN: &str = "maskrcnn";
/// `"minigo"` (`mllog.constants.MINIGO`).
pub const MINIGO: &str = "minigo";
/// `"ncf"` (`mllog.constants.NCF`).
pub const NCF: &str = "ncf";
/// `"resnet"` (`mllog.constants.RESNET`).
pub const RESNET: &str = "resnet";
/// `"ssd"` (`mllog.constants.SSD`).
pub const SSD: &str = "ssd";
/// `"retinanet"` (`mllog.constants.RETINANET`).
pub const RETINANET: &str = "retinanet";
/// `"stable_diffusion"` (`mllog.constants.STABLE_DIFFUSION`).
pub const STABLE_DIFFUSION: &str = "stable_diffusion";
/// `"transformer"` (`mllog.constants.TRANSFORMER`).
pub const TRANSFORMER: &str = "transformer";
/// `"rnnt"` (`mllog.constants.RNNT`).
pub const RNNT: &str = "rnnt";
/// `"unet3d"` (`mllog.constants.UNET3D`).
pub const UNET3D: &str = "unet3d";
/// `"bert"` (`mllog.constants.BERT`).
pub const BERT: &str = "bert";
/// `"gpt3"` (`mllog.constants.GPT3`).
pub const GPT3: &str = "gpt3";
/// `"llama2_70b_lora"` (`mllog.constants.LLAMA2_70B_LORA`).
pub const LLAMA2_70B_LORA: &str = "llama2_70b_lora";
/// `"gnn"` (`mllog.constants.GNN`).
pub const GNN: &str = "gnn";
/// `"rgat"` (`mllog.constants.RGAT`).
pub const RGAT: &str = "rgat";
/// `"llama31_405b"` (`mllog.constants.LLAMA31_405B`).
pub const LLAMA31_405B: &str = "llama31_405b";
/// `"llama31_8b"` (`mllog.constants.LLAMA31_8B`).
pub const LLAMA31_8B: &str = "llama31_8b";
/// `"flux1"` (`mllog.constants.FLUX1`).
pub const FLUX1: &str = "flux1";
/// `"deepseekv3_671b"` (`mllog.constants.DEEPSEEKV3_671B`).
pub const DEEPSEEKV3_671B: &str = "deepseekv3_671b";
/// `"qwen35_397b_grpo"` (`mllog.constants.QWEN35_397B_GRPO`).
pub const QWEN35_397B_GRPO: &str = "qwen35_397b_grpo";
/// `"dlrmv4"` (`mllog.constants.DLRMV4`).
pub const DLRMV4: &str = "dlrmv4";

// Constant values - model info
/// `"adagrad"` (`mllog.constants.ADAGRAD`).
pub const ADAGRAD: &str = "adagrad";
/// `"adam"` (`mllog.constants.ADAM`).
pub const ADAM: &str = "adam";
/// `"adamw"` (`mllog.constants.ADAMW`).
pub const ADAMW: &str = "adamw";
/// `"lars"` (`mllog.constants.LARS`).
pub const LARS: &str = "lars";
/// `"lazy_adam"` (`mllog.constants.LAZY_ADAM`).
pub const LAZY_ADAM: &str = "lazy_adam";
/// `"sgd"` (`mllog.constants.SGD`).
pub const SGD: &str = "sgd";
/// `"lamb"` (`mllog.constants.LAMB`).
pub const LAMB: &str = "lamb";

// Constant values - metadata info
/// `"aborted"` (`mllog.constants.ABORTED`).
pub const ABORTED: &str = "aborted";
/// `"success"` (`mllog.constants.SUCCESS`).
pub const SUCCESS: &str = "success";

// Log keys - submission info
/// `"submission_benchmark"` (`mllog.constants.SUBMISSION_BENCHMARK`).
pub const SUBMISSION_BENCHMARK: &str = "submission_benchmark";
/// `"submission_division"` (`mllog.constants.SUBMISSION_DIVISION`).
pub const SUBMISSION_DIVISION: &str = "submission_division";
/// `"submission_entry"` (`mllog.constants.SUBMISSION_ENTRY`).
pub const SUBMISSION_ENTRY: &str = "submission_entry";
/// `"submission_org"` (`mllog.constants.SUBMISSION_ORG`).
pub const SUBMISSION_ORG: &str = "submission_org";
/// `"submission_platform"` (`mllog.constants.SUBMISSION_PLATFORM`).
pub const SUBMISSION_PLATFORM: &str = "submission_platform";
/// `"submission_poc_name"` (`mllog.constants.SUBMISSION_POC_NAME`).
pub const SUBMISSION_POC_NAME: &str = "submission_poc_name";
/// `"submission_poc_email"` (`mllog.constants.SUBMISSION_POC_EMAIL`).
pub const SUBMISSION_POC_EMAIL: &str = "submission_poc_email";
/// `"submission_status"` (`mllog.constants.SUBMISSION_STATUS`).
pub const SUBMISSION_STATUS: &str = "submission_status";

// Log keys - timing info
/// `"block_start"` (`mllog.constants.BLOCK_START`).
pub const BLOCK_START: &str = "block_start";
/// `"block_stop"` (`mllog.constants.BLOCK_STOP`).
pub const BLOCK_STOP: &str = "block_stop";
/// `"epoch_start"` (`mllog.constants.EPOCH_START`).
pub const EPOCH_START: &str = "epoch_start";
/// `"epoch_stop"` (`mllog.constants.EPOCH_STOP`).
pub const EPOCH_STOP: &str = "epoch_stop";
/// `"eval_start"` (`mllog.constants.EVAL_START`).
pub const EVAL_START: &str = "eval_start";
/// `"eval_stop"` (`mllog.constants.EVAL_STOP`).
pub const EVAL_STOP: &str = "eval_stop";
/// `"init_start"` (`mllog.constants.INIT_START`).
pub const INIT_START: &str = "init_start";
/// `"init_stop"` (`mllog.constants.INIT_STOP`).
pub const INIT_STOP: &str = "init_stop";
/// `"staging_start"` (`mllog.constants.STAGING_START`).
pub const STAGING_START: &str = "staging_start";
/// `"staging_stop"` (`mllog.constants.STAGING_STOP`).
pub const STAGING_STOP: &str = "staging_stop";
/// `"run_start"` (`mllog.constants.RUN_START`).
pub const RUN_START: &str = "run_start";
/// `"run_stop"` (`mllog.constants.RUN_STOP`).
pub const RUN_STOP: &str = "run_stop";

// Log keys - common run info
/// `"cache_clear"` (`mllog.constants.CACHE_CLEAR`).
pub const CACHE_CLEAR: &str = "cache_clear";
/// `"eval_accuracy"` (`mllog.constants.EVAL_ACCURACY`).
pub const EVAL_ACCURACY: &str = "eval_accuracy";
/// `"eval_samples"` (`mllog.constants.EVAL_SAMPLES`).
pub const EVAL_SAMPLES: &str = "eval_samples";
/// `"seed"` (`mllog.constants.SEED`).
pub const SEED: &str = "seed";
/// `"train_samples"` (`mllog.constants.TRAIN_SAMPLES`).
pub const TRAIN_SAMPLES: &str = "train_samples";
/// `"trained_samples"` (`mllog.constants.TRAINED_SAMPLES`).
pub const TRAINED_SAMPLES: &str = "trained_samples";
/// `"weights_initialization"` (`mllog.constants.WEIGHTS_INITIALIZATION`).
pub const WEIGHTS_INITIALIZATION: &str = "weights_initialization";

// Log keys - model hyperparameters
/// `"global_batch_size"` (`mllog.constants.GLOBAL_BATCH_SIZE`).
pub const GLOBAL_BATCH_SIZE: &str = "global_batch_size";
/// `"gradient_accumulation_steps"` (`mllog.constants.GRADIENT_ACCUMULATION_STEPS`).
pub const GRADIENT_ACCUMULATION_STEPS: &str = "gradient_accumulation_steps";
/// `"lars_epsilon"` (`mllog.constants.LARS_EPSILON`).
pub const LARS_EPSILON: &str = "lars_epsilon";
/// `"lars_opt_base_learning_rate"` (`mllog.constants.LARS_OPT_BASE_LEARNING_RATE`).
pub const LARS_OPT_BASE_LEARNING_RATE: &str = "lars_opt_base_learning_rate";
/// `"lars_opt_end_learning_rate"` (`mllog.constants.LARS_OPT_END_LR`).
pub const LARS_OPT_END_LR: &str = "lars_opt_end_learning_rate";
/// `"lars_opt_learning_rate_warmup_epochs"` (`mllog.constants.LARS_OPT_LEARNING_RATE_WARMUP_EPOCHS`).
pub const LARS_OPT_LEARNING_RATE_WARMUP_EPOCHS: &str = "lars_opt_learning_rate_warmup_epochs";
/// `"lars_opt_learning_rate_decay_poly_power"` (`mllog.constants.LARS_OPT_LR_DECAY_POLY_POWER`).
pub const LARS_OPT_LR_DECAY_POLY_POWER: &str = "lars_opt_learning_rate_decay_poly_power";
/// `"lars_opt_learning_rate_decay_steps"` (`mllog.constants.LARS_OPT_LR_DECAY_STEPS`).
pub const LARS_OPT_LR_DECAY_STEPS: &str = "lars_opt_learning_rate_decay_steps";
/// `"lars_opt_momentum"` (`mllog.constants.LARS_OPT_MOMENTUM`).
pub const LARS_OPT_MOMENTUM: &str = "lars_opt_momentum";
/// `"lars_opt_weight_decay"` (`mllog.constants.LARS_OPT_WEIGHT_DECAY`).
pub const LARS_OPT_WEIGHT_DECAY: &str = "lars_opt_weight_decay";
/// `"max_image_size"` (`mllog.constants.MAX_IMAGE_SIZE`).
pub const MAX_IMAGE_SIZE: &str = "max_image_size";
/// `"max_samples"` (`mllog.constants.MAX_SAMPLES`).
pub const MAX_SAMPLES: &str = "max_samples";
/// `"max_steps"` (`mllog.constants.MAX_STEPS`).
pub const MAX_STEPS: &str = "max_steps";
/// `"max_sequence_length"` (`mllog.constants.MAX_SEQUENCE_LENGTH`).
pub const MAX_SEQUENCE_LENGTH: &str = "max_sequence_length";
/// `"min_image_size"` (`mllog.constants.MIN_IMAGE_SIZE`).
pub const MIN_IMAGE_SIZE: &str = "min_image_size";
/// `"model_bn_span"` (`mllog.constants.MODEL_BN_SPAN`).
pub const MODEL_BN_SPAN: &str = "model_bn_span";
/// `"num_image_candidates"` (`mllog.constants.NUM_IMAGE_CANDIDATES`).
pub const NUM_IMAGE_CANDIDATES: &str = "num_image_candidates";
/// `"num_warmup_steps"` (`mllog.constants.NUM_WARMUP_STEPS`).
pub const NUM_WARMUP_STEPS: &str = "num_warmup_steps";
/// `"opt_adagrad_epsilon"` (`mllog.constants.OPT_ADAGRAD_EPSILON`).
pub const OPT_ADAGRAD_EPSILON: &str = "opt_adagrad_epsilon";
/// `"opt_adagrad_initial_accumulator_value"` (`mllog.constants.OPT_ADAGRAD_INITIAL_ACCUMULATOR_VALUE`).
pub const OPT_ADAGRAD_INITIAL_ACCUMULATOR_VALUE: &str = "opt_adagrad_initial_accumulator_value";
/// `"opt_adagrad_learning_rate_decay"` (`mllog.constants.OPT_ADAGRAD_LR_DECAY`).
pub const OPT_ADAGRAD_LR_DECAY: &str = "opt_adagrad_learning_rate_decay";
/// `"opt_adamw_beta_1"` (`mllog.constants.OPT_ADAMW_BETA_1`).
pub const OPT_ADAMW_BETA_1: &str = "opt_adamw_beta_1";
/// `"opt_adamw_beta_2"` (`mllog.constants.OPT_ADAMW_BETA_2`).
pub const OPT_ADAMW_BETA_2: &str = "opt_adamw_beta_2";
/// `"opt_adamw_epsilon"` (`mllog.constants.OPT_ADAMW_EPSILON`).
pub const OPT_ADAMW_EPSILON: &str = "opt_adamw_epsilon";
/// `"opt_adamw_weight_decay"` (`mllog.constants.OPT_ADAMW_WEIGHT_DECAY`).
pub const OPT_ADAMW_WEIGHT_DECAY: &str = "opt_adamw_weight_decay";
/// `"opt_adam_beta_1"` (`mllog.constants.OPT_ADAM_BETA_1`).
pub const OPT_ADAM_BETA_1: &str = "opt_adam_beta_1";
/// `"opt_adam_beta_2"` (`mllog.constants.OPT_ADAM_BETA_2`).
pub const OPT_ADAM_BETA_2: &str = "opt_adam_beta_2";
/// `"opt_adam_epsilon"` (`mllog.constants.OPT_ADAM_EPSILON`).
pub const OPT_ADAM_EPSILON: &str = "opt_adam_epsilon";
/// `"opt_name"` (`mllog.constants.OPT_NAME`).
pub const OPT_NAME: &str = "opt_name";
/// `"opt_base_learning_rate"` (`mllog.constants.OPT_BASE_LR`).
pub const OPT_BASE_LR: &str = "opt_base_learning_rate";
/// `"opt_end_learning_rate"` (`mllog.constants.OPT_END_LR`).
pub const OPT_END_LR: &str = "opt_end_learning_rate";
/// `"opt_lamb_learning_rate_min"` (`mllog.constants.OPT_LAMB_LR_MIN`).
pub const OPT_LAMB_LR_MIN: &str = "opt_lamb_learning_rate_min";
/// `"opt_lamb_learning_rate_decay_poly_power"` (`mllog.constants.OPT_LAMB_LR_DECAY_POLY_POWER`).
pub const OPT_LAMB_LR_DECAY_POLY_POWER: &str = "opt_lamb_learning_rate_decay_poly_power";
/// `"opt_lamb_weight_decay_rate"` (`mllog.constants.OPT_LAMB_WEIGHT_DECAY`).
pub const OPT_LAMB_WEIGHT_DECAY: &str = "opt_lamb_weight_decay_rate";
/// `"opt_lamb_beta_1"` (`mllog.constants.OPT_LAMB_BETA_1`).
pub const OPT_LAMB_BETA_1: &str = "opt_lamb_beta_1";
/// `"opt_lamb_beta_2"` (`mllog.constants.OPT_LAMB_BETA_2`).
pub const OPT_LAMB_BETA_2: &str = "opt_lamb_beta_2";
/// `"opt_lamb_epsilon"` (`mllog.constants.OPT_LAMB_EPSILON`).
pub const OPT_LAMB_EPSILON: &str = "opt_lamb_epsilon";
/// `"opt_lamb_learning_rate_hold_epochs"` (`mllog.constants.OPT_LAMB_LR_HOLD_EPOCHS`).
pub const OPT_LAMB_LR_HOLD_EPOCHS: &str = "opt_lamb_learning_rate_hold_epochs";
/// `"opt_learning_rate_alt_decay_func"` (`mllog.constants.OPT_LR_ALT_DECAY_FUNC`).
pub const OPT_LR_ALT_DECAY_FUNC: &str = "opt_learning_rate_alt_decay_func";
/// `"opt_learning_rate_alt_warmup_func"` (`mllog.constants.OPT_LR_ALT_WARMUP_FUNC`).
pub const OPT_LR_ALT_WARMUP_FUNC: &str = "opt_learning_rate_alt_warmup_func";
/// `"opt_learning_rate_decay_boundary_epochs"` (`mllog.constants.OPT_LR_DECAY_BOUNDARY_EPOCHS`).
pub const OPT_LR_DECAY_BOUNDARY_EPOCHS: &str = "opt_learning_rate_decay_boundary_epochs";
/// `"opt_learning_rate_decay_boundary_steps"` (`mllog.constants.OPT_LR_DECAY_BOUNDARY_STEPS`).
pub const OPT_LR_DECAY_BOUNDARY_STEPS: &str = "opt_learning_rate_decay_boundary_steps";
/// `"opt_learning_rate_decay_factor"` (`mllog.constants.OPT_LR_DECAY_FACTOR`).
pub const OPT_LR_DECAY_FACTOR: &str = "opt_learning_rate_decay_factor";
/// `"opt_learning_rate_decay_interval"` (`mllog.constants.OPT_LR_DECAY_INTERVAL`).
pub const OPT_LR_DECAY_INTERVAL: &str = "opt_learning_rate_decay_interval";
/// `"opt_learning_rate_decay_start_step"` (`mllog.constants.OPT_LR_DECAY_START_STEP`).
pub const OPT_LR_DECAY_START_STEP: &str = "opt_learning_rate_decay_start_step";
/// `"opt_learning_rate_decay_steps"` (`mllog.constants.OPT_LR_DECAY_STEPS`).
pub const OPT_LR_DECAY_STEPS: &str = "opt_learning_rate_decay_steps";
/// `"opt_learning_rate_decay_schedule"` (`mllog.constants.OPT_LR_DECAY_SCHEDULE`).
pub const OPT_LR_DECAY_SCHEDULE: &str = "opt_learning_rate_decay_schedule";
/// `"opt_learning_rate_remain_steps"` (`mllog.constants.OPT_LR_REMAIN_STEPS`).
pub const OPT_LR_REMAIN_STEPS: &str = "opt_learning_rate_remain_steps";
/// `"opt_learning_rate_training_steps"` (`mllog.constants.OPT_LR_TRAINING_STEPS`).
pub const OPT_LR_TRAINING_STEPS: &str = "opt_learning_rate_training_steps";
/// `"opt_learning_rate_warmup_epochs"` (`mllog.constants.OPT_LR_WARMUP_EPOCHS`).
pub const OPT_LR_WARMUP_EPOCHS: &str = "opt_learning_rate_warmup_epochs";
/// `"opt_learning_rate_warmup_factor"` (`mllog.constants.OPT_LR_WARMUP_FACTOR`).
pub const OPT_LR_WARMUP_FACTOR: &str = "opt_learning_rate_warmup_factor";
/// `"opt_learning_rate_warmup_steps"` (`mllog.constants.OPT_LR_WARMUP_STEPS`).
pub const OPT_LR_WARMUP_STEPS: &str = "opt_learning_rate_warmup_steps";
/// `"opt_weight_decay"` (`mllog.constants.OPT_WEIGHT_DECAY`).
pub const OPT_WEIGHT_DECAY: &str = "opt_weight_decay";
/// `"opt_gradient_clip_norm"` (`mllog.constants.OPT_GRADIENT_CLIP_NORM`).
pub const OPT_GRADIENT_CLIP_NORM: &str = "opt_gradient_clip_norm";
/// `"data_speed_perturbaton_max"` (`mllog.constants.DATA_SPEED_PERTURBATON_MAX`).
pub const DATA_SPEED_PERTURBATON_MAX: &str = "data_speed_perturbaton_max";
/// `"data_speed_perturbaton_min"` (`mllog.constants.DATA_SPEED_PERTURBATON_MIN`).
pub const DATA_SPEED_PERTURBATON_MIN: &str = "data_speed_perturbaton_min";
/// `"data_spec_augment_freq_n"` (`mllog.constants.DATA_SPEC_AUGMENT_FREQ_N`).
pub const DATA_SPEC_AUGMENT_FREQ_N: &str = "data_spec_augment_freq_n";
/// `"data_spec_augment_freq_min"` (`mllog.constants.DATA_SPEC_AUGMENT_FREQ_MIN`).
pub const DATA_SPEC_AUGMENT_FREQ_MIN: &str = "data_spec_augment_freq_min";
/// `"data_spec_augment_freq_max"` (`mllog.constants.DATA_SPEC_AUGMENT_FREQ_MAX`).
pub const DATA_SPEC_AUGMENT_FREQ_MAX: &str = "data_spec_augment_freq_max";
/// `"data_spec_augment_time_n"` (`mllog.constants.DATA_SPEC_AUGMENT_TIME_N`).
pub const DATA_SPEC_AUGMENT_TIME_N: &str = "data_spec_augment_time_n";
/// `"data_spec_augment_time_min"` (`mllog.constants.DATA_SPEC_AUGMENT_TIME_MIN`).
pub const DATA_SPEC_AUGMENT_TIME_MIN: &str = "data_spec_augment_time_min";
/// `"data_spec_augment_time_max"` (`mllog.constants.DATA_SPEC_AUGMENT_TIME_MAX`).
pub const DATA_SPEC_AUGMENT_TIME_MAX: &str = "data_spec_augment_time_max";
/// `"data_train_num_buckets"` (`mllog.constants.DATA_TRAIN_NUM_BUCKETS`).
pub const DATA_TRAIN_NUM_BUCKETS: &str = "data_train_num_buckets";
/// `"data_train_max_duration"` (`mllog.constants.DATA_TRAIN_MAX_DURATION`).
pub const DATA_TRAIN_MAX_DURATION: &str = "data_train_max_duration";
/// `"data_num_buckets"` (`mllog.constants.DATA_NUM_BUCKETS`).
pub const DATA_NUM_BUCKETS: &str = "data_num_buckets";
/// `"model_eval_ema_factor"` (`mllog.constants.MODEL_EVAL_EMA_FACTOR`).
pub const MODEL_EVAL_EMA_FACTOR: &str = "model_eval_ema_factor";
/// `"model_weights_initialization_scale"` (`mllog.constants.MODEL_WEIGHTS_INITIALIZATION_SCALE`).
pub const MODEL_WEIGHTS_INITIALIZATION_SCALE: &str = "model_weights_initialization_scale";
/// `"eval_max_prediction_symbols"` (`mllog.constants.EVAL_MAX_PREDICTION_SYMBOLS`).
pub const EVAL_MAX_PREDICTION_SYMBOLS: &str = "eval_max_prediction_symbols";
/// `"start_warmup_step"` (`mllog.constants.START_WARMUP_STEP`).
pub const START_WARMUP_STEP: &str = "start_warmup_step";
/// `"init_checkpoint_step"` (`mllog.constants.INIT_CHECKPOINT_STEP`).
pub const INIT_CHECKPOINT_STEP: &str = "init_checkpoint_step";
/// `"lora_alpha"` (`mllog.constants.LORA_ALPHA`).
pub const LORA_ALPHA: &str = "lora_alpha";
/// `"moe_aux_loss_coeff"` (`mllog.constants.MOE_AUX_LOSS_COEFF`).
pub const MOE_AUX_LOSS_COEFF: &str = "moe_aux_loss_coeff";
/// `"generation_training_rollout_temperature"` (`mllog.constants.GENERATION_TRAINING_ROLLOUT_TEMPERATURE`).
pub const GENERATION_TRAINING_ROLLOUT_TEMPERATURE: &str = "generation_training_rollout_temperature";
/// `"generation_training_rollout_top_p"` (`mllog.constants.GENERATION_TRAINING_ROLLOUT_TOP_P`).
pub const GENERATION_TRAINING_ROLLOUT_TOP_P: &str = "generation_training_rollout_top_p";
/// `"generation_validation_rollout_temperature"` (`mllog.constants.GENERATION_VALIDATION_ROLLOUT_TEMPERATURE`).
pub const GENERATION_VALIDATION_ROLLOUT_TEMPERATURE: &str =
    "generation_validation_rollout_temperature";
/// `"generation_validation_rollout_top_p"` (`mllog.constants.GENERATION_VALIDATION_ROLLOUT_TOP_P`).
pub const GENERATION_VALIDATION_ROLLOUT_TOP_P: &str = "generation_validation_rollout_top_p";
/// `"num_generations_per_prompt"` (`mllog.constants.NUM_GENERATIONS_PER_PROMPT`).
pub const NUM_GENERATIONS_PER_PROMPT: &str = "num_generations_per_prompt";
/// `"num_prompts_per_step"` (`mllog.constants.NUM_PROMPTS_PER_STEP`).
pub const NUM_PROMPTS_PER_STEP: &str = "num_prompts_per_step";
/// `"opt_sparse_name"` (`mllog.constants.OPT_SPARSE_NAME`).
pub const OPT_SPARSE_NAME: &str = "opt_sparse_name";
/// `"opt_sparse_base_learning_rate"` (`mllog.constants.OPT_SPARSE_BASE_LR`).
pub const OPT_SPARSE_BASE_LR: &str = "opt_sparse_base_learning_rate";
/// `"opt_learning_rate_warmup_start_lr"` (`mllog.constants.OPT_LR_WARMUP_START_LR`).
pub const OPT_LR_WARMUP_START_LR: &str = "opt_learning_rate_warmup_start_lr";
/// `"eval_every_data_pct"` (`mllog.constants.EVAL_EVERY_DATA_PCT`).
pub const EVAL_EVERY_DATA_PCT: &str = "eval_every_data_pct";

// Log keys - misc.
/// `"bbox"` (`mllog.constants.BBOX`).
pub const BBOX: &str = "bbox";
/// `"segm"` (`mllog.constants.SEGM`).
pub const SEGM: &str = "segm";

// Log metadata keys
/// `"epoch_count"` (`mllog.constants.EPOCH_COUNT`).
pub const EPOCH_COUNT: &str = "epoch_count";
/// `"epoch_num"` (`mllog.constants.EPOCH_NUM`).
pub const EPOCH_NUM: &str = "epoch_num";
/// `"first_epoch_num"` (`mllog.constants.FIRST_EPOCH_NUM`).
pub const FIRST_EPOCH_NUM: &str = "first_epoch_num";
/// `"status"` (`mllog.constants.STATUS`).
pub const STATUS: &str = "status";
/// `"step_num"` (`mllog.constants.STEP_NUM`).
pub const STEP_NUM: &str = "step_num";
/// `"samples_count"` (`mllog.constants.SAMPLES_COUNT`).
pub const SAMPLES_COUNT: &str = "samples_count";

// Power constants
/// `"power_measurement_start"` (`mllog.constants.POWER_MEASUREMENT_START`).
pub const POWER_MEASUREMENT_START: &str = "power_measurement_start";
/// `"power_measurement_stop"` (`mllog.constants.POWER_MEASUREMENT_STOP`).
pub const POWER_MEASUREMENT_STOP: &str = "power_measurement_stop";
/// `"power_reading"` (`mllog.constants.POWER_READING`).
pub const POWER_READING: &str = "power_reading";
/// `"conversion_eff"` (`mllog.constants.CONVERTION_EFF`).
pub const CONVERTION_EFF: &str = "conversion_eff";
/// `"interconnect_power_est"` (`mllog.constants.INTERCONNECT_POWER_EST`).
pub const INTERCONNECT_POWER_EST: &str = "interconnect_power_est";

// Precision constants
/// `"lowest_numerical_precision_in_attn"` (`mllog.constants.LOWEST_NUMERICAL_PRECISION_IN_ATTN`).
pub const LOWEST_NUMERICAL_PRECISION_IN_ATTN: &str = "lowest_numerical_precision_in_attn";
/// `"lowest_numerical_precision_in_comm"` (`mllog.constants.LOWEST_NUMERICAL_PRECISION_IN_COMM`).
pub const LOWEST_NUMERICAL_PRECISION_IN_COMM: &str = "lowest_numerical_precision_in_comm";
/// `"lowest_numerical_precision_in_linear"` (`mllog.constants.LOWEST_NUMERICAL_PRECISION_IN_LINEAR`).
pub const LOWEST_NUMERICAL_PRECISION_IN_LINEAR: &str = "lowest_numerical_precision_in_linear";

// Parallelism constants
/// `"tensor_parallelism"` (`mllog.constants.TENSOR_PARALLELISM`).
pub const TENSOR_PARALLELISM: &str = "tensor_parallelism";
/// `"pipeline_parallelism"` (`mllog.constants.PIPELINE_PARALLELISM`).
pub const PIPELINE_PARALLELISM: &str = "pipeline_parallelism";
/// `"context_parallelism"` (`mllog.constants.CONTEXT_PARALLELISM`).
pub const CONTEXT_PARALLELISM: &str = "context_parallelism";
/// `"expert_parallelism"` (`mllog.constants.EXPERT_PARALLELISM`).
pub const EXPERT_PARALLELISM: &str = "expert_parallelism";
/// `"micro_batch_size"` (`mllog.constants.MICRO_BATCH_SIZE`).
pub const MICRO_BATCH_SIZE: &str = "micro_batch_size";
/// `"config_filename"` (`mllog.constants.CONFIG_FILENAME`).
pub const CONFIG_FILENAME: &str = "config_filename";

// Keys and names the rules check that have no constant in mlperf_logging 4.1.68
/// `"lora_rank"`: LoRA rank; closed `llama2_70b_lora` requires exactly 16. No Python constant.
pub const LORA_RANK: &str = "lora_rank";
/// `"evaluation_frequency"`: Evaluation interval in samples (`flux1`, 6.1.0). No Python constant.
pub const EVALUATION_FREQUENCY: &str = "evaluation_frequency";
/// `"averaged_validation_loss"`: Validation loss key checked by open `flux1`. No Python constant.
pub const AVERAGED_VALIDATION_LOSS: &str = "averaged_validation_loss";
/// `"aggregated_eval_accuracy"`: Aggregated eval metrics (`stable_diffusion`, 5.0.0). No Python constant.
pub const AGGREGATED_EVAL_ACCURACY: &str = "aggregated_eval_accuracy";
/// `"tracked_stats"`: Conventional key for per-block statistics (`{"throughput": ...}`); ignored by the checker.
pub const TRACKED_STATS: &str = "tracked_stats";
/// `"train_loss"`: Conventional key for the training loss; ignored by the checker.
pub const TRAIN_LOSS: &str = "train_loss";
/// `"gpt_oss_20b"`: Benchmark name `gpt_oss_20b` (rulesets 6.0.0 and 6.1.0). No Python constant.
pub const GPT_OSS_20B: &str = "gpt_oss_20b";

/// Every string above, sorted and deduplicated, so that a key given at run time can be mapped
/// back to its `&'static str` (see [`intern`]) without allocating.
pub static ALL: &[&str] = &[
    "",
    "INTERVAL_END",
    "INTERVAL_START",
    "POINT_IN_TIME",
    "aborted",
    "adagrad",
    "adam",
    "adamw",
    "aggregated_eval_accuracy",
    "averaged_validation_loss",
    "bbox",
    "bert",
    "block_start",
    "block_stop",
    "cache_clear",
    "closed",
    "cloud",
    "config_filename",
    "context_parallelism",
    "conversion_eff",
    "data_num_buckets",
    "data_spec_augment_freq_max",
    "data_spec_augment_freq_min",
    "data_spec_augment_freq_n",
    "data_spec_augment_time_max",
    "data_spec_augment_time_min",
    "data_spec_augment_time_n",
    "data_speed_perturbaton_max",
    "data_speed_perturbaton_min",
    "data_train_max_duration",
    "data_train_num_buckets",
    "deepseekv3_671b",
    "dlrm_dcnv2",
    "dlrmv4",
    "epoch_count",
    "epoch_num",
    "epoch_start",
    "epoch_stop",
    "eval_accuracy",
    "eval_every_data_pct",
    "eval_max_prediction_symbols",
    "eval_samples",
    "eval_start",
    "eval_stop",
    "evaluation_frequency",
    "expert_parallelism",
    "first_epoch_num",
    "flux1",
    "generation_training_rollout_temperature",
    "generation_training_rollout_top_p",
    "generation_validation_rollout_temperature",
    "generation_validation_rollout_top_p",
    "global_batch_size",
    "gnmt",
    "gnn",
    "gpt3",
    "gpt_oss_20b",
    "gradient_accumulation_steps",
    "init_checkpoint_step",
    "init_start",
    "init_stop",
    "interconnect_power_est",
    "lamb",
    "lars",
    "lars_epsilon",
    "lars_opt_base_learning_rate",
    "lars_opt_end_learning_rate",
    "lars_opt_learning_rate_decay_poly_power",
    "lars_opt_learning_rate_decay_steps",
    "lars_opt_learning_rate_warmup_epochs",
    "lars_opt_momentum",
    "lars_opt_weight_decay",
    "lazy_adam",
    "llama2_70b_lora",
    "llama31_405b",
    "llama31_8b",
    "lora_alpha",
    "lora_rank",
    "lowest_numerical_precision_in_attn",
    "lowest_numerical_precision_in_comm",
    "lowest_numerical_precision_in_linear",
    "maskrcnn",
    "max_image_size",
    "max_samples",
    "max_sequence_length",
    "max_steps",
    "micro_batch_size",
    "min_image_size",
    "minigo",
    "mllog_default",
    "model_bn_span",
    "model_eval_ema_factor",
    "model_weights_initialization_scale",
    "moe_aux_loss_coeff",
    "ncf",
    "num_generations_per_prompt",
    "num_image_candidates",
    "num_prompts_per_step",
    "num_warmup_steps",
    "onprem",
    "open",
    "opt_adagrad_epsilon",
    "opt_adagrad_initial_accumulator_value",
    "opt_adagrad_learning_rate_decay",
    "opt_adam_beta_1",
    "opt_adam_beta_2",
    "opt_adam_epsilon",
    "opt_adamw_beta_1",
    "opt_adamw_beta_2",
    "opt_adamw_epsilon",
    "opt_adamw_weight_decay",
    "opt_base_learning_rate",
    "opt_end_learning_rate",
    "opt_gradient_clip_norm",
    "opt_lamb_beta_1",
    "opt_lamb_beta_2",
    "opt_lamb_epsilon",
    "opt_lamb_learning_rate_decay_poly_power",
    "opt_lamb_learning_rate_hold_epochs",
    "opt_lamb_learning_rate_min",
    "opt_lamb_weight_decay_rate",
    "opt_learning_rate_alt_decay_func",
    "opt_learning_rate_alt_warmup_func",
    "opt_learning_rate_decay_boundary_epochs",
    "opt_learning_rate_decay_boundary_steps",
    "opt_learning_rate_decay_factor",
    "opt_learning_rate_decay_interval",
    "opt_learning_rate_decay_schedule",
    "opt_learning_rate_decay_start_step",
    "opt_learning_rate_decay_steps",
    "opt_learning_rate_remain_steps",
    "opt_learning_rate_training_steps",
    "opt_learning_rate_warmup_epochs",
    "opt_learning_rate_warmup_factor",
    "opt_learning_rate_warmup_start_lr",
    "opt_learning_rate_warmup_steps",
    "opt_name",
    "opt_sparse_base_learning_rate",
    "opt_sparse_name",
    "opt_weight_decay",
    "pipeline_parallelism",
    "power_measurement_start",
    "power_measurement_stop",
    "power_reading",
    "qwen35_397b_grpo",
    "research",
    "resnet",
    "retinanet",
    "rgat",
    "rnnt",
    "run_start",
    "run_stop",
    "samples_count",
    "seed",
    "segm",
    "sgd",
    "ssd",
    "stable_diffusion",
    "staging_start",
    "staging_stop",
    "start_warmup_step",
    "status",
    "step_num",
    "submission_benchmark",
    "submission_division",
    "submission_entry",
    "submission_org",
    "submission_platform",
    "submission_poc_email",
    "submission_poc_name",
    "submission_status",
    "success",
    "tensor_parallelism",
    "tracked_stats",
    "train_loss",
    "train_samples",
    "trained_samples",
    "transformer",
    "unet3d",
    "weights_initialization",
];

/// The `&'static` copy of `key` when it is one of the known strings ([`ALL`]).
///
/// Keys are almost always constants; mapping them to `'static` lets a record carry its key
/// without a heap allocation.
pub fn intern(key: &str) -> Option<&'static str> {
    ALL.binary_search(&key).ok().map(|i| ALL[i])
}

/// A benchmark name, typed. [`Benchmark::as_str`] gives the string logged as
/// `submission_benchmark`; [`Benchmark::from_name`] parses one.
///
/// It covers every benchmark of the supported training rulesets, current and retired; which
/// ones a given ruleset still accepts is the compliance rules' business (a retired one is
/// checked under the newest ruleset that has it). `FromStr` is [`Benchmark::from_name`] with
/// an error naming the unknown benchmark, for command lines and environment variables. The
/// enum is `#[non_exhaustive]`: new rulesets add benchmarks.
///
/// ```
/// use mllog_core::Benchmark;
///
/// let b: Benchmark = "llama2_70b_lora".parse().unwrap();
/// assert_eq!(b, Benchmark::Llama2_70bLora);
/// assert_eq!(b.as_str(), "llama2_70b_lora");
/// assert_eq!(b.to_string(), "llama2_70b_lora");
/// assert_eq!(Benchmark::from_name("gpt5"), None);
/// let err = "gpt5".parse::<Benchmark>().unwrap_err();
/// assert_eq!(err.to_string(), r#"unknown benchmark "gpt5""#);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Benchmark {
    /// `bert`
    Bert,
    /// `deepseekv3_671b`
    Deepseekv3_671b,
    /// `dlrm_dcnv2`
    DlrmDcnv2,
    /// `dlrmv4`
    Dlrmv4,
    /// `flux1`
    Flux1,
    /// `gnn`
    Gnn,
    /// `gnmt`
    Gnmt,
    /// `gpt3`
    Gpt3,
    /// `gpt_oss_20b` (no constant in `mlperf_logging`)
    GptOss20b,
    /// `llama2_70b_lora`
    Llama2_70bLora,
    /// `llama31_405b`
    Llama31_405b,
    /// `llama31_8b`
    Llama31_8b,
    /// `maskrcnn`
    Maskrcnn,
    /// `minigo`
    Minigo,
    /// `ncf`
    Ncf,
    /// `qwen35_397b_grpo`
    Qwen35_397bGrpo,
    /// `resnet`
    Resnet,
    /// `retinanet`
    Retinanet,
    /// `rgat`
    Rgat,
    /// `rnnt`
    Rnnt,
    /// `ssd`
    Ssd,
    /// `stable_diffusion`
    StableDiffusion,
    /// `transformer`
    Transformer,
    /// `unet3d`
    Unet3d,
}

impl Benchmark {
    /// Every benchmark, in alphabetical order of its name.
    pub const ALL: [Benchmark; 24] = [
        Benchmark::Bert,
        Benchmark::Deepseekv3_671b,
        Benchmark::DlrmDcnv2,
        Benchmark::Dlrmv4,
        Benchmark::Flux1,
        Benchmark::Gnmt,
        Benchmark::Gnn,
        Benchmark::Gpt3,
        Benchmark::GptOss20b,
        Benchmark::Llama2_70bLora,
        Benchmark::Llama31_405b,
        Benchmark::Llama31_8b,
        Benchmark::Maskrcnn,
        Benchmark::Minigo,
        Benchmark::Ncf,
        Benchmark::Qwen35_397bGrpo,
        Benchmark::Resnet,
        Benchmark::Retinanet,
        Benchmark::Rgat,
        Benchmark::Rnnt,
        Benchmark::Ssd,
        Benchmark::StableDiffusion,
        Benchmark::Transformer,
        Benchmark::Unet3d,
    ];

    /// The name written in logs (`submission_benchmark`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Benchmark::Bert => BERT,
            Benchmark::Deepseekv3_671b => DEEPSEEKV3_671B,
            Benchmark::DlrmDcnv2 => DLRM_DCNV2,
            Benchmark::Dlrmv4 => DLRMV4,
            Benchmark::Flux1 => FLUX1,
            Benchmark::Gnn => GNN,
            Benchmark::Gnmt => GNMT,
            Benchmark::Gpt3 => GPT3,
            Benchmark::GptOss20b => GPT_OSS_20B,
            Benchmark::Llama2_70bLora => LLAMA2_70B_LORA,
            Benchmark::Llama31_405b => LLAMA31_405B,
            Benchmark::Llama31_8b => LLAMA31_8B,
            Benchmark::Maskrcnn => MASKRCNN,
            Benchmark::Minigo => MINIGO,
            Benchmark::Ncf => NCF,
            Benchmark::Qwen35_397bGrpo => QWEN35_397B_GRPO,
            Benchmark::Resnet => RESNET,
            Benchmark::Retinanet => RETINANET,
            Benchmark::Rgat => RGAT,
            Benchmark::Rnnt => RNNT,
            Benchmark::Ssd => SSD,
            Benchmark::StableDiffusion => STABLE_DIFFUSION,
            Benchmark::Transformer => TRANSFORMER,
            Benchmark::Unet3d => UNET3D,
        }
    }

    /// The benchmark with this log name, if there is one.
    pub fn from_name(name: &str) -> Option<Benchmark> {
        Benchmark::ALL.iter().copied().find(|b| b.as_str() == name)
    }
}

impl std::fmt::Display for Benchmark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Benchmark {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Benchmark::from_name(s).ok_or_else(|| crate::Error::UnknownBenchmark(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_sorted_for_binary_search() {
        assert!(ALL.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(intern("lora_rank"), Some(LORA_RANK));
        assert_eq!(intern("no_such_key"), None);
    }

    #[test]
    fn benchmark_names_round_trip() {
        for b in Benchmark::ALL {
            assert_eq!(Benchmark::from_name(b.as_str()), Some(b));
            assert!(ALL.contains(&b.as_str()));
        }
        assert!(Benchmark::ALL
            .windows(2)
            .all(|w| w[0].as_str() < w[1].as_str()));
    }
}
