"""Strings of the planning sections (cost, adaptive steps, the request-shape grid, history), merged into
reports.i18n's catalogue."""

from __future__ import annotations

# key -> (English, Chinese). Parameters use str.format names.
PLAN_CATALOGUE: dict[str, tuple[str, str]] = {
    "cost": ("Cost", "成本"),
    "cost_prices": ("Prices ({currency}, from the {source})", "价格（{currency}，来自{source}）"),
    "cost_source_scenario": ("scenario", "场景"),
    "cost_source_options": ("command's options", "命令选项"),
    "cost_source_scenario+options": ("scenario and the command's options", "场景与命令选项"),
    "cost_device_hour": ("device-hour", "设备小时"),
    "cost_host_hour": ("host-hour", "主机小时"),
    "cost_energy_kwh": ("kWh", "千瓦时"),
    "cost_per_hour": ("Cost per hour", "每小时成本"),
    "cost_per_1m_embeddings": ("Cost per 1M embeddings", "每百万向量成本"),
    "cost_per_1m_tokens": ("Cost per 1M input tokens", "每百万输入 token 成本"),
    "cost_monthly": (
        "Monthly cost for {target} req/s with {headroom} headroom ({devices} device(s)): {monthly} {currency}",
        "以 {headroom} 余量服务 {target} req/s（{devices} 个设备）的月成本：{monthly} {currency}",
    ),
    "cost_monthly_at_most": (
        "Monthly cost for {target} req/s with {headroom} headroom (at most {devices} device(s)): at most {monthly} {currency}",
        "以 {headroom} 余量服务 {target} req/s（至多 {devices} 个设备）的月成本：至多 {monthly} {currency}",
    ),
    "cost_monthly_parts": (
        "devices {devices} · hosts {hosts} · energy {energy}",
        "设备 {devices} · 主机 {hosts} · 能耗 {energy}",
    ),
    "cost_note": (
        "A step's hourly cost is its serving devices x the device-hour price of their kind, one host x the "
        "host-hour price and the serving devices' measured mean power x the kWh price; divided by the step's "
        "successful embeddings (input tokens) per hour. A month is 730 hours; the plan's energy is that of the "
        "target rate at the capacity step's joules per request. A part without a price or a measurement is left out.",
        "阶梯每小时成本 = 服务设备数 × 该类设备小时价 + 一台主机 × 主机小时价 + 服务设备实测平均功耗 × 电价；"
        "再除以该阶梯每小时成功生成的向量数（输入 token 数）。一个月按 730 小时计；规划的能耗按容量阶梯每请求焦耳数"
        "乘以目标速率计算。缺少价格或测量值的部分不计入。",
    ),
    "cheapest_text": (
        "Cheapest meeting the SLO: {name}, {cost} {currency} per million embeddings at {qps} req/s.",
        "满足 SLO 的最低成本配置：{name}，在 {qps} req/s 时每百万向量 {cost} {currency}。",
    ),
    "adaptive_steps": ("Adaptive steps", "自适应阶梯"),
    "adaptive_ended": ("Ended", "结束原因"),
    "adaptive_converged": ("converged", "已收敛"),
    "adaptive_max_time": ("max time: never converged", "达到最长时间：未收敛"),
    "adaptive_n_ok": ("Ok answers", "成功应答数"),
    "adaptive_width": ("Interval width / aim", "区间宽度 / 目标"),
    "adaptive_note": (
        "A step with steps.until ends once the 95% distribution-free interval of its P99 (order statistics of its "
        "ok latencies after the warm-up) is no wider than the aim relative to the P99, with its minimum answers "
        "and time; else at its duration. A step that never converged makes capacity and compare verdicts "
        "at it uncertain.",
        "设置了 steps.until 的阶梯：当其 P99 的 95% 无分布假设区间（预热后成功延迟的次序统计量）相对 P99 的宽度不超过目标，"
        "且满足最少应答数与最短时间时即结束；否则在其时长结束。未收敛的阶梯使该处的容量与对比结论不确定。",
    ),
    "capacity_uncertain": (
        "uncertain: the capacity rests on a step whose P99 never converged; rerun it longer or with a wider steps.until",
        "不确定：容量结论依赖一个 P99 未收敛的阶梯；请延长该阶梯或放宽 steps.until",
    ),
    "label": ("Label", "标签"),
    "history_title": ("Headline figures across runs", "历次运行的核心指标"),
    "history_series": ("Series", "序列"),
    "history_commit": ("Commit", "提交"),
    "history_flagged": ("newest: worse", "最新：变差"),
    "history_regressed": ("The newest run {run} is worse than the previous runs beyond their noise", "最新运行 {run} 比此前各次运行差，超出其噪声"),
    "history_ok": ("The newest run is not worse than the previous {n} run(s) beyond their noise.", "最新运行未比此前 {n} 次运行差（在噪声之内）。"),
    "history_apart": ("Runs not in this series", "不属于该序列的运行"),
    "history_note": (
        "Each point is a run at the series' highest load, with its 95% interval (goodput: per-second counts "
        "resampled; P99: the run's bootstrap). The newest run is flagged when compare calls it significantly "
        "worse against each of the previous runs (up to five) and its figure is worse than all of theirs. "
        "* marks a commit with uncommitted changes.",
        "每个点是一次运行在该序列最高负载下的结果及其 95% 区间（有效吞吐：按秒计数重采样；P99：该次运行的自助法区间）。"
        "当对比统计认为最新运行相对此前每一次（至多五次）都显著变差、且其指标比它们全部都差时，予以标记。* 表示提交含未提交的改动。",
    ),
    "adaptive_fixed": ("fixed", "固定时长"),
    "sweep_title": ("Request-shape grid", "请求形态网格"),
    "sweep_inputs": ("Inputs per request", "每请求输入数"),
    "sweep_users": ("Users", "并发用户"),
    "sweep_tokens": ("tokens per input", "每输入 token 数"),
    "sweep_best": (
        "Best under the SLO: {inputs} input(s) per request at {users} users, {eps} embeddings/s at P99 {p99} ms",
        "满足 SLO 的最佳形态：每请求 {inputs} 个输入、{users} 个并发用户，{eps} 向量/s，P99 {p99} ms",
    ),
    "sweep_none": ("No cell meets the SLO.", "没有单元格满足 SLO。"),
    "sweep_missing": ("Shapes without a run folder", "未留下运行目录的形态"),
    "sweep_note": (
        "Each cell is one adaptive step (steps.until) of the run of its request shape: embeddings/s are the inputs "
        "of its ok requests per second of the steady window. The best cell has the most embeddings/s among the "
        "cells meeting the P99 SLO and error budget; it is boxed in red.",
        "每个单元格是对应请求形态运行中的一个自适应阶梯（steps.until）：向量/s 为稳态窗口内每秒成功请求的输入数。"
        "最佳单元格是满足 P99 SLO 与错误预算的单元格中向量/s 最高者，以红框标出。",
    ),
    "m_cost_per_1m_embeddings": ("Cost per 1M embeddings", "每百万向量成本"),
}
