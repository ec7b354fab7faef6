"""Published model configs, written by hand from the checkpoints' ``config.json``.

Only the keys RoPE depends on (and ``model_type``), with the values of the published files.
Used by tests/test_published_configs.py and bench/hf_accuracy.py. Each entry: the config,
the layer type to read (None when the model has one kind), and the arguments
``rope_kwargs_from_config`` must return (written out by hand, not computed).
"""

from __future__ import annotations

# fmt: off
PHI35_LONG = [
    1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601,
    1.5899999141693115, 1.600000023841858, 1.6200000047683716, 2.620000123977661,
    3.2300000190734863, 3.2300000190734863, 4.789999961853027, 7.400000095367432,
    7.700000286102295, 9.09000015258789, 12.199999809265137, 17.670000076293945,
    24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
    32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992,
    50.340003967285156, 50.45000457763672, 57.55000305175781, 57.93000411987305,
    58.21000289916992, 60.1400032043457, 62.61000442504883, 62.62000274658203,
    62.71000289916992, 63.1400032043457, 63.1400032043457, 63.77000427246094, 63.93000411987305,
    63.96000289916992, 63.970001220703125, 64.02999877929688, 64.06999969482422,
    64.08000183105469, 64.12000274658203, 64.41000366210938, 64.4800033569336,
    64.51000213623047, 64.52999877929688, 64.83999633789062,
]
PHI35_SHORT = [
    1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842,
    1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842,
    1.0699999332427979, 1.0999999046325684, 1.1099998950958252, 1.1599998474121094,
    1.1599998474121094, 1.1699998378753662, 1.2899998426437378, 1.339999794960022,
    1.679999828338623, 1.7899998426437378, 1.8199998140335083, 1.8499997854232788,
    1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745,
    2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
    2.0199997425079346, 2.0199997425079346, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0799996852874756,
    2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533,
    2.729999542236328, 2.749999523162842, 2.8399994373321533,
]
PHI4_MINI_LONG = [
    1, 1.118320672, 1.250641126, 1.398617824, 1.564103225, 1.74916897, 1.956131817, 2.187582649,
    2.446418898, 2.735880826, 3.059592084, 3.421605075, 3.826451687, 4.279200023, 4.785517845,
    5.351743533, 5.984965424, 6.693110555, 7.485043894, 8.370679318, 9.36110372, 10.4687158,
    11.70738129, 13.09260651, 14.64173252, 16.37415215, 18.31155283, 20.47818807, 22.90118105,
    25.61086418, 28.64115884, 32.03, 32.1, 32.13, 32.23, 32.6, 32.61, 32.64, 32.66, 32.7, 32.71,
    32.93, 32.97, 33.28, 33.49, 33.5, 44.16, 47.77,
]
PHI3_128K_LONG = [
    1.0299999713897705, 1.0499999523162842, 1.0499999523162842, 1.0799999237060547,
    1.2299998998641968, 1.2299998998641968, 1.2999999523162842, 1.4499999284744263,
    1.5999999046325684, 1.6499998569488525, 1.8999998569488525, 2.859999895095825,
    3.68999981880188, 5.419999599456787, 5.489999771118164, 5.489999771118164, 9.09000015258789,
    11.579999923706055, 15.65999984741211, 15.769999504089355, 15.789999961853027,
    18.360000610351562, 21.989999771118164, 23.079999923706055, 30.009998321533203,
    32.35000228881836, 32.590003967285156, 35.56000518798828, 39.95000457763672,
    53.840003967285156, 56.20000457763672, 57.95000457763672, 59.29000473022461,
    59.77000427246094, 59.920005798339844, 61.190006256103516, 61.96000671386719,
    62.50000762939453, 63.3700065612793, 63.48000717163086, 63.48000717163086,
    63.66000747680664, 63.850006103515625, 64.08000946044922, 64.760009765625,
    64.80001068115234, 64.81001281738281, 64.81001281738281,
]
PHI3_128K_SHORT = (
    [1.05, 1.05, 1.05, 1.1, 1.1, 1.1, 1.2500000000000002, 1.2500000000000002,
    1.4000000000000004, 1.4500000000000004, 1.5500000000000005, 1.8500000000000008,
    1.9000000000000008] + [2.000000000000001] * 19 + [2.1000000000000005, 2.1000000000000005,
    2.2, 2.3499999999999996, 2.3499999999999996, 2.3499999999999996, 2.3499999999999996,
    2.3999999999999995, 2.3999999999999995, 2.6499999999999986, 2.6999999999999984,
    2.8999999999999977, 2.9499999999999975, 3.049999999999997, 3.049999999999997,
    3.049999999999997]
)
# fmt: on

LLAMA_31_8B = {  # meta-llama/Llama-3.1-8B
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
}
QWEN25_7B_YARN = {  # Qwen/Qwen2.5-7B-Instruct with the YaRN block its card gives (legacy type)
    "model_type": "qwen2",
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"},
}
MISTRAL_7B_V03 = {  # mistralai/Mistral-7B-v0.3
    "model_type": "mistral",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "sliding_window": None,
}
PHI35_MINI = {  # microsoft/Phi-3.5-mini-instruct
    "model_type": "phi3",
    "hidden_size": 3072,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {"long_factor": PHI35_LONG, "short_factor": PHI35_SHORT, "type": "longrope"},
}
PHI4_MINI = {  # microsoft/Phi-4-mini-instruct
    "model_type": "phi3",
    "hidden_size": 3072,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "partial_rotary_factor": 0.75,
    "rope_scaling": {"long_factor": PHI4_MINI_LONG, "short_factor": [1.0] * 48, "type": "longrope"},
}
PHI3_MINI_128K = {  # microsoft/Phi-3-mini-128k-instruct, as first published ("su")
    "model_type": "phi3",
    "hidden_size": 3072,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {"long_factor": PHI3_128K_LONG, "short_factor": PHI3_128K_SHORT, "type": "su"},
}
DEEPSEEK_V2_LITE = {  # deepseek-ai/DeepSeek-V2-Lite
    "model_type": "deepseek_v2",
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "max_position_embeddings": 163840,
    "rope_theta": 10000,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
}
DEEPSEEK_V3 = {  # deepseek-ai/DeepSeek-V3
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "max_position_embeddings": 163840,
    "rope_theta": 10000,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
}
GEMMA3_4B_TEXT = {  # google/gemma-3-4b-it, text_config as published (flat form)
    "model_type": "gemma3_text",
    "hidden_size": 2560,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131072,
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
    "sliding_window": 1024,
    "sliding_window_pattern": 6,
    "query_pre_attn_scalar": 256,
}
GEMMA3_4B = {"model_type": "gemma3", "text_config": GEMMA3_4B_TEXT}  # the multimodal wrapper
GEMMA3_4B_NESTED = {  # the same model as transformers 5 saves it: one rope dict per layer type
    "model_type": "gemma3_text",
    "hidden_size": 2560,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131072,
    "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    },
    "num_hidden_layers": 34,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5 + ["sliding_attention"] * 4,
    "sliding_window": 1024,
    "query_pre_attn_scalar": 256,
}
PYTHIA_1B = {  # EleutherAI/pythia-1b
    "model_type": "gpt_neox",
    "hidden_size": 2048,
    "num_attention_heads": 8,
    "max_position_embeddings": 2048,
    "rotary_emb_base": 10000,
    "rotary_pct": 0.25,
}
PHI_2 = {  # microsoft/phi-2
    "model_type": "phi",
    "hidden_size": 2560,
    "num_attention_heads": 32,
    "max_position_embeddings": 2048,
    "partial_rotary_factor": 0.4,
    "rope_theta": 10000.0,
}
STABLELM_2_1_6B = {  # stabilityai/stablelm-2-1_6b
    "model_type": "stablelm",
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 4096,
    "partial_rotary_factor": 0.25,
    "rope_theta": 10000,
}
GPTJ_6B = {  # EleutherAI/gpt-j-6b
    "model_type": "gptj",
    "n_embd": 4096,
    "n_head": 16,
    "n_positions": 2048,
    "rotary_dim": 64,
}
FALCON_7B = {  # tiiuae/falcon-7b
    "model_type": "falcon",
    "hidden_size": 4544,
    "n_head": 71,
    "alibi": False,
    "multi_query": True,
    "new_decoder_architecture": False,
    "parallel_attn": True,
}
COMMAND_R = {  # CohereForAI/c4ai-command-r-v01
    "model_type": "cohere",
    "hidden_size": 8192,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "max_position_embeddings": 8192,
    "rope_theta": 8000000.0,
    "use_qk_norm": False,
    "logit_scale": 0.0625,
}
GLM4_9B_0414 = {  # THUDM/GLM-4-9B-0414
    "model_type": "glm4",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "max_position_embeddings": 32768,
    "partial_rotary_factor": 0.5,
    "rope_theta": 10000.0,
}
QWEN2_VL_7B = {  # Qwen/Qwen2-VL-7B-Instruct: M-RoPE
    "model_type": "qwen2_vl",
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
}
QWEN2_VL_7B_V5 = dict(  # the same, as transformers 5 saves it (rope_type beside type)
    QWEN2_VL_7B,
    rope_scaling={"type": "mrope", "rope_type": "default", "mrope_section": [16, 24, 24]},
)
QWEN2_VL_7B_VISION = {  # Qwen/Qwen2-VL-7B-Instruct's vision_config: no model_type
    "depth": 32,
    "embed_dim": 1280,
    "mlp_ratio": 4,
    "num_heads": 16,
    "in_chans": 3,
    "hidden_size": 3584,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "spatial_patch_size": 14,
    "temporal_patch_size": 2,
}
QWEN25_VL_7B_VISION = {  # Qwen/Qwen2.5-VL-7B-Instruct's vision_config: no model_type
    "depth": 32,
    "hidden_act": "silu",
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "in_chans": 3,
    "out_hidden_size": 3584,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "spatial_patch_size": 14,
    "window_size": 112,
    "fullatt_block_indexes": [7, 15, 23, 31],
    "tokens_per_second": 2,
    "temporal_patch_size": 2,
}
QWEN25_VL_7B = {  # Qwen/Qwen2.5-VL-7B-Instruct (text part inside text_config in v5 saves)
    "model_type": "qwen2_5_vl",
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "max_position_embeddings": 128000,
    "rope_theta": 1000000.0,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
}

_YARN_V2 = {
    "rope_type": "yarn",
    "beta_fast": 32,
    "beta_slow": 1,
    "factor": 40,
    "mscale": 0.707,
    "mscale_all_dim": 0.707,
    "original_max_position_embeddings": 4096,
}
_YARN_V3 = dict(_YARN_V2, mscale=1.0, mscale_all_dim=1.0)

_MROPE_16_24_24 = {  # M-RoPE: 16 pairs of time, 24 of height, 24 of width, half layout
    "layout": "half",
    "base": 1000000.0,
    "rotary_dim": 128,
    "scaling": None,
    "pair_axes": (0,) * 16 + (1,) * 24 + (2,) * 24,
}

#: name -> (config, layer_type, the kwargs rope_kwargs_from_config must return (no seq_len))
PUBLISHED = {
    "qwen2-vl": (QWEN2_VL_7B, None, dict(_MROPE_16_24_24, max_position_embeddings=32768)),
    "qwen2-vl-v5": (
        QWEN2_VL_7B_V5,
        None,
        dict(_MROPE_16_24_24, max_position_embeddings=32768),
    ),
    "qwen2.5-vl": (QWEN25_VL_7B, None, dict(_MROPE_16_24_24, max_position_embeddings=128000)),
    "llama-3.1": (
        LLAMA_31_8B,
        None,
        {
            "layout": "half",
            "base": 500000.0,
            "rotary_dim": 128,
            "scaling": LLAMA_31_8B["rope_scaling"],
            "max_position_embeddings": 131072,
        },
    ),
    "qwen2.5-yarn": (
        QWEN25_7B_YARN,
        None,
        {
            "layout": "half",
            "base": 1000000.0,
            "rotary_dim": 128,
            "scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32768,
            },
            "max_position_embeddings": 32768,
        },
    ),
    "mistral-7b-v0.3": (
        MISTRAL_7B_V03,
        None,
        {
            "layout": "half",
            "base": 1000000.0,
            "rotary_dim": 128,
            "scaling": None,
            "max_position_embeddings": 32768,
        },
    ),
    "phi-3.5-mini": (
        PHI35_MINI,
        None,
        {
            "layout": "half",
            "base": 10000.0,
            "rotary_dim": 96,
            "scaling": {
                "rope_type": "longrope",
                "long_factor": PHI35_LONG,
                "short_factor": PHI35_SHORT,
                "original_max_position_embeddings": 4096,
            },
            "max_position_embeddings": 131072,
        },
    ),
    "phi-4-mini": (
        PHI4_MINI,
        None,
        {
            "layout": "half",
            "base": 10000.0,
            "rotary_dim": 96,
            "scaling": {
                "rope_type": "longrope",
                "long_factor": PHI4_MINI_LONG,
                "short_factor": [1.0] * 48,
                "original_max_position_embeddings": 4096,
            },
            "max_position_embeddings": 131072,
        },
    ),
    "phi-3-mini-128k-su": (
        PHI3_MINI_128K,
        None,
        {
            "layout": "half",
            "base": 10000.0,
            "rotary_dim": 96,
            "scaling": {
                "rope_type": "longrope",
                "long_factor": PHI3_128K_LONG,
                "short_factor": PHI3_128K_SHORT,
                "original_max_position_embeddings": 4096,
            },
            "max_position_embeddings": 131072,
        },
    ),
    "deepseek-v2-lite": (
        DEEPSEEK_V2_LITE,
        None,
        {
            "layout": "interleaved",
            "base": 10000.0,
            "rotary_dim": 64,
            "scaling": _YARN_V2,
            "max_position_embeddings": 163840,
        },
    ),
    "deepseek-v3": (
        DEEPSEEK_V3,
        None,
        {
            "layout": "interleaved",
            "base": 10000.0,
            "rotary_dim": 64,
            "scaling": _YARN_V3,
            "max_position_embeddings": 163840,
        },
    ),
    "gemma-3-flat-sliding": (
        GEMMA3_4B_TEXT,
        "sliding_attention",
        {
            "layout": "half",
            "base": 10000.0,
            "rotary_dim": 256,
            "scaling": None,
            "max_position_embeddings": 131072,
        },
    ),
    "gemma-3-flat-full": (
        GEMMA3_4B_TEXT,
        "full_attention",
        {
            "layout": "half",
            "base": 1000000.0,
            "rotary_dim": 256,
            "scaling": {"rope_type": "linear", "factor": 8.0},
            "max_position_embeddings": 131072,
        },
    ),
    "gemma-3-wrapper-full": (
        GEMMA3_4B,
        "full_attention",
        {
            "layout": "half",
            "base": 1000000.0,
            "rotary_dim": 256,
            "scaling": {"rope_type": "linear", "factor": 8.0},
            "max_position_embeddings": 131072,
        },
    ),
    "gemma-3-nested-sliding": (
        GEMMA3_4B_NESTED,
        "sliding_attention",
        {
            "layout": "half",
            "base": 10000.0,
            "rotary_dim": 256,
            "scaling": None,
            "max_position_embeddings": 131072,
        },
    ),
    "gemma-3-nested-full": (
        GEMMA3_4B_NESTED,
        "full_attention",
        {
            "layout": "half",
            "base": 1000000.0,
            "rotary_dim": 256,
            "scaling": {"rope_type": "linear", "factor": 8.0},
            "max_position_embeddings": 131072,
        },
    ),
    "pythia-1b": (
        PYTHIA_1B,
        None,
        {
            "layout": "half",
            "base": 10000.0,
            "rotary_dim": 64,
            "scaling": None,
            "max_position_embeddings": 2048,
        },
    ),
    "phi-2": (
        PHI_2,
        None,
        {
            "layout": "half",
            "base": 10000.0,
            "rotary_dim": 32,
            "scaling": None,
            "max_position_embeddings": 2048,
        },
    ),
    "stablelm-2-1.6b": (
        STABLELM_2_1_6B,
        None,
        {
            "layout": "half",
            "base": 10000.0,
            "rotary_dim": 16,
            "scaling": None,
            "max_position_embeddings": 4096,
        },
    ),
    "gpt-j-6b": (
        GPTJ_6B,
        None,
        {
            "layout": "interleaved",
            "base": 10000.0,
            "rotary_dim": 64,
            "scaling": None,
            "max_position_embeddings": 2048,
        },
    ),
    "falcon-7b": (
        FALCON_7B,
        None,
        {
            "layout": "half",
            "base": 10000.0,
            "rotary_dim": 64,
            "scaling": None,
            "max_position_embeddings": None,
        },
    ),
    "command-r": (
        COMMAND_R,
        None,
        {
            "layout": "interleaved",
            "base": 8000000.0,
            "rotary_dim": 128,
            "scaling": None,
            "max_position_embeddings": 8192,
        },
    ),
    "glm-4-9b-0414": (
        GLM4_9B_0414,
        None,
        {
            "layout": "interleaved",
            "base": 10000.0,
            "rotary_dim": 64,
            "scaling": None,
            "max_position_embeddings": 32768,
        },
    ),
}

DBRX_INSTRUCT = {  # databricks/dbrx-instruct: theta inside attn_config
    "model_type": "dbrx",
    "d_model": 6144,
    "n_heads": 48,
    "max_seq_len": 32768,
    "attn_config": {"kv_n_heads": 8, "rope_theta": 500000, "clip_qkv": 8},
}

#: Configs transformers 5.24 itself cannot load as published, and the form it is compared in:
#: Phi3Config renames "su" to "longrope" after copying original_max_position_embeddings
#: only for "longrope", then fails its own check; the published file was later renamed so.
HF_FORM = {
    "phi-3-mini-128k-su": dict(
        PHI3_MINI_128K, rope_scaling=dict(PHI3_MINI_128K["rope_scaling"], type="longrope")
    ),
}

#: name -> (config, pattern of the error): published configs fastpe refuses for now.
REFUSED_PUBLISHED = {
    # transformers 5.24 reads it with theta 10000 (it ignores attn_config['rope_theta'])
    "dbrx-instruct": (DBRX_INSTRUCT, r"config\['attn_config'\]\['rope_theta'\] is 500000"),
}
