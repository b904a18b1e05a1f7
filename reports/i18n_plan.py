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
    "m_cost_per_1m_embeddings": ("Cost per 1M embeddings", "每百万向量成本"),
}
