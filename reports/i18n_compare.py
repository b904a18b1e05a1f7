"""The comparison's reasons in the report's languages (analysis/compare/reasons.py codes), merged into
reports.i18n's catalogue as `cr_<code>`; the English matches the reasons' own text."""

from __future__ import annotations

from analysis.compare.reasons import REASONS

_ZH: dict[str, str] = {
    "short_steady": "稳态仅 {have:.1f} 秒 < 所需 {need:g} 秒",
    "few_ok": "P{q:g} 的成功样本 {have} 个 < 所需 {need} 个",
    "few_telemetry": "遥测仅 {have} 秒 < 所需 {need} 秒",
    "no_requests_in": "{sides}没有请求",
    "zero_width": "95% 置信区间宽度为零：数据无法分辨该变化",
    "sides_baseline": "基线",
    "sides_candidate": "候选",
    "sides_both": "基线和候选",
    "change": "基线 {base}，候选 {cand}，变化 {change}（差值的 95% 置信区间 {low} … {high}）",
    "budget_none": "无结论：候选在此没有请求",
    "budget_fail": "候选错误率 {rate}（{requests} 个请求中 {failed} 个失败）> 预算 {budget}，无论其速度如何",
    "budget_pass": "候选错误率 {rate}（{requests} 个请求中 {failed} 个失败）<= 预算 {budget}",
    "rule_empty": "无结论：{sides}在此没有成功请求；由错误预算判定",
    "rule_unmeasured": "无结论：两次运行未都测量 {metric}",
    "rule_unsupported": "无结论（{why}）：{change}",
    "rule_fail": "{change}，规则 {rule}",
    "rule_noise": "{change}：越过 {rule}，但区间包含零（噪声）",
    "rule_pass": "{change}",
}

COMPARE_CATALOGUE: dict[str, tuple[str, str]] = {
    **{f"cr_{code}": (text, _ZH[code]) for code, text in REASONS.items()},
    "cr_line": ("{rule} at {scope}: {reason}", "{rule}（{scope}）：{reason}"),
    "cr_also": ("; also fails {rule}", "；同时未通过 {rule}"),
}
