"""One complete, realistic sample per dialect (the contract test cuts and mutates them)."""

from __future__ import annotations

SAMPLES: dict[str, str] = {
    "hermes": (
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", '
        '"options": {"units": ["°C"], "q": "say \\"hi\\""}}}\n</tool_call>\nDone.'
    ),
    "qwen3_coder": (
        "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nZürich\n"
        "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\nDone."
    ),
    "glm": (
        "Checking.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京</arg_value>\n"
        "<arg_key>metric</arg_key>\n<arg_value>true</arg_value>\n</tool_call>Done."
    ),
    "mistral": '[TOOL_CALLS]get_weather[ARGS]{"city": "Zürich", "days": 2}',
    "llama3_json": '{"name": "get_weather", "parameters": {"city": "Zürich", "days": 2}}',
    "pythonic": '[get_weather(city="Zürich", days=2), get_time()]',
    "deepseek": (
        "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city": "Zürich"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    ),
    "kimi_k2": (
        "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Zürich"}<|tool_call_end|>'
        "<|tool_calls_section_end|>"
    ),
    "harmony": (
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"city":"Zürich"}<|call|>'
    ),
    "granite": '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Zürich"}}]',
    "gemma4": (
        'Checking.<|tool_call>call:get_weather{city:<|"|>Zürich<|"|>,days:2,'
        'options:{units:[<|"|>°C<|"|>],deep:true}}<tool_call|>Done.'
    ),
    "hunyuan": (
        '<answer>\n<tool_calls>[{"name": "get_weather", "arguments": {"city": "Zürich", '
        '"days": 2}}]</tool_calls>\n</answer>'
    ),
    "nemotron": (
        'Checking.<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Zürich"}}]</TOOLCALL>'
    ),
    "lfm2": (
        '<|tool_call_start|>[get_weather(city="Zürich", days=2), get_time()]<|tool_call_end|>Done.'
    ),
}
