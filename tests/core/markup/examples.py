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
    "seed_oss": (
        "<seed:think>The format is <seed:tool_call>\n<function=get_time>\n</function>\n"
        "</seed:tool_call>.</seed:think><seed:tool_call>\n<function=get_weather>\n"
        "<parameter=city>Zürich</parameter>\n<parameter=days>2</parameter>\n</function>\n"
        "</seed:tool_call>"
    ),
    "glm": (
        "Checking.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京</arg_value>\n"
        "<arg_key>metric</arg_key>\n<arg_value>true</arg_value>\n</tool_call>Done."
    ),
    "minimax_m2": (
        'Checking.\n<minimax:tool_call>\n<invoke name="get_weather">\n'
        '<parameter name="city">Zürich</parameter>\n<parameter name="days">3</parameter>\n'
        '</invoke>\n<invoke name="get_time">\n</invoke>\n</minimax:tool_call>\nDone.'
    ),
    "mistral": '[TOOL_CALLS]get_weather[ARGS]{"city": "Zürich", "days": 2}',
    "llama3_json": '{"name": "get_weather", "parameters": {"city": "Zürich", "days": 2}}',
    "pythonic": '[get_weather(city="Zürich", days=2), get_time()]',
    "deepseek": (
        "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city": "Zürich"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    ),
    "deepseek_v32": (
        'Checking.<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="city" string="true">Zürich</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="options" string="false">{"units": ["°C"]}</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>"
    ),
    "step3": (
        "Checking.<｜tool_calls_begin｜>\n<｜tool_call_begin｜>function<｜tool_sep｜>"
        '<steptml:invoke name="get_weather">\n<steptml:parameter name="city">Zürich'
        '</steptml:parameter>\n<steptml:parameter name="metric">true</steptml:parameter>\n'
        "</steptml:invoke><｜tool_call_end｜>\n<｜tool_calls_end｜>"
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
