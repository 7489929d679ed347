"""Colours, fonts and the style sheet, light or dark following the system colour scheme.

Invariants:
- One :class:`Theme` is current at a time (``current()``); canvas items read colours from it
  at paint time, so switching the scheme only needs a repaint.
- Pens, brushes and fonts are created once per theme, never inside ``paint()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QGuiApplication, QPalette, QPen
from PySide6.QtWidgets import QApplication

from nneditor.ui.model_index import CATEGORIES

#: Category -> (accent colour, human label). Accents are mid-tones readable on light and dark.
CATEGORY_STYLE: dict[str, tuple[str, str]] = {
    "attention": ("#8b5cf6", "Attention"),
    "ffn": ("#10b981", "Feed-forward"),
    "conv": ("#3b82f6", "Convolution"),
    "norm": ("#f59e0b", "Normalization"),
    "recurrent": ("#f97316", "Recurrent"),
    "embedding": ("#ec4899", "Embedding"),
    "head": ("#ef4444", "Head"),
    "stack": ("#6366f1", "Block stack"),
    "io": ("#64748b", "Input / output"),
    "constant": ("#94a3b8", "Constant"),
    "other": ("#9ca3af", "Other"),
}

UI_FONT_PT = 10


@dataclass
class Theme:
    dark: bool
    canvas: QColor
    surface: QColor
    text: QColor
    muted: QColor
    border: QColor
    accent: QColor
    edge: QColor
    fills: dict[str, QColor] = field(default_factory=dict)
    accents: dict[str, QColor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for cat in CATEGORIES:
            accent = QColor(CATEGORY_STYLE[cat][0])
            self.accents[cat] = accent
            self.fills[cat] = _mix(self.surface, accent, 0.16 if self.dark else 0.09)
        self.edge_pen = QPen(self.edge, 1.3)
        self.edge_pen.setCosmetic(True)
        self.edge_highlight_pen = QPen(self.accent, 2.4)
        self.edge_highlight_pen.setCosmetic(True)
        self.edge_brush = QBrush(self.edge)
        self.highlight_brush = QBrush(self.accent)
        self.border_pen = QPen(self.border, 1.0)
        self.border_pen.setCosmetic(True)
        self.select_pen = QPen(self.accent, 2.5)
        self.select_pen.setCosmetic(True)
        self.title_font = QFont()
        self.title_font.setPointSizeF(10.5)
        self.title_font.setWeight(QFont.Weight.DemiBold)
        self.detail_font = QFont()
        self.detail_font.setPointSizeF(8.5)
        self.tag_font = QFont()
        self.tag_font.setPointSizeF(7.5)
        self.tag_font.setWeight(QFont.Weight.DemiBold)
        self.badge_font = QFont()
        self.badge_font.setPointSizeF(9)
        self.badge_font.setWeight(QFont.Weight.Bold)

    def fill(self, category: str) -> QColor:
        return self.fills.get(category, self.fills["other"])

    def accent_of(self, category: str) -> QColor:
        return self.accents.get(category, self.accents["other"])


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )


def light_theme() -> Theme:
    return Theme(
        dark=False,
        canvas=QColor("#f6f7f9"),
        surface=QColor("#ffffff"),
        text=QColor("#1f2328"),
        muted=QColor("#5b6471"),
        border=QColor("#c9ced6"),
        accent=QColor("#2563eb"),
        edge=QColor("#9aa3b0"),
    )


def dark_theme() -> Theme:
    return Theme(
        dark=True,
        canvas=QColor("#17191d"),
        surface=QColor("#23262c"),
        text=QColor("#e6e8eb"),
        muted=QColor("#9aa3ad"),
        border=QColor("#3a3f47"),
        accent=QColor("#60a5fa"),
        edge=QColor("#6b7380"),
    )


_current: Theme | None = None


def current() -> Theme:
    global _current
    if _current is None:
        _current = dark_theme() if system_is_dark() else light_theme()
    return _current


_metrics: dict[bool, QFontMetricsF] = {}


def metrics(title: bool) -> QFontMetricsF:
    """Cached metrics of the canvas title (or detail) font."""
    fm = _metrics.get(title)
    if fm is None:
        t = current()
        fm = QFontMetricsF(t.title_font if title else t.detail_font)
        _metrics[title] = fm
    return fm


def measure(text: str, title: bool) -> float:
    """Width of ``text`` in the canvas title (or detail) font, in scene units at 100 %."""
    return metrics(title).horizontalAdvance(text)


def system_is_dark() -> bool:
    """The system colour scheme (Qt 6.5+ style hints), else the palette's window lightness."""
    app = QGuiApplication.instance()
    if app is None:
        return False
    scheme = QGuiApplication.styleHints().colorScheme()
    if scheme == Qt.ColorScheme.Dark:
        return True
    if scheme == Qt.ColorScheme.Light:
        return False
    return QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness() < 110


def apply(app: QApplication, dark: bool | None = None) -> Theme:
    """Install the Fusion style, the palette and the style sheet; returns the current theme."""
    global _current
    dark = system_is_dark() if dark is None else dark
    _current = dark_theme() if dark else light_theme()
    _metrics.clear()
    app.setStyle("Fusion")
    app.setPalette(_palette(_current))
    font = QFont(app.font())
    font.setPointSize(UI_FONT_PT)
    app.setFont(font)
    app.setStyleSheet(style_sheet(_current))
    return _current


def _palette(t: Theme) -> QPalette:
    p = QPalette()
    window = QColor("#eef0f3") if not t.dark else QColor("#1d2025")
    base = t.surface
    roles = {
        QPalette.ColorRole.Window: window,
        QPalette.ColorRole.WindowText: t.text,
        QPalette.ColorRole.Base: base,
        QPalette.ColorRole.AlternateBase: _mix(base, window, 0.5),
        QPalette.ColorRole.Text: t.text,
        QPalette.ColorRole.Button: _mix(base, window, 0.35),
        QPalette.ColorRole.ButtonText: t.text,
        QPalette.ColorRole.Highlight: t.accent,
        QPalette.ColorRole.HighlightedText: QColor("#ffffff"),
        QPalette.ColorRole.ToolTipBase: base,
        QPalette.ColorRole.ToolTipText: t.text,
        QPalette.ColorRole.PlaceholderText: t.muted,
        QPalette.ColorRole.Link: t.accent,
        QPalette.ColorRole.Mid: t.border,
    }
    for role, color in roles.items():
        p.setColor(role, color)
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, t.muted)
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, t.muted)
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText, t.muted)
    return p


def style_sheet(t: Theme) -> str:
    surface = t.surface.name()
    border = t.border.name()
    muted = t.muted.name()
    accent = t.accent.name()
    text = t.text.name()
    hover = _mix(t.surface, t.accent, 0.12).name()
    return f"""
    QWidget#TopBar {{ background: {surface}; border-bottom: 1px solid {border}; }}
    QLabel#AppTitle {{ font-size: 15px; font-weight: 700; }}
    QLabel#DocTitle {{ font-weight: 600; }}
    QLabel#Muted, QLabel#DeviceLabel {{ color: {muted}; }}
    QLabel#Chip {{ color: {muted}; border: 1px solid {border}; border-radius: 9px;
                   padding: 1px 8px; }}
    QToolButton {{ padding: 4px 9px; border-radius: 6px; border: 1px solid transparent; }}
    QToolButton#Compact, QToolButton#Level {{ padding: 4px 6px; }}
    QToolButton:hover {{ background: {hover}; border-color: {border}; }}
    QToolButton:checked {{ background: {hover}; border-color: {accent}; color: {accent}; }}
    QPushButton#Primary {{ background: {accent}; color: white; border: none; border-radius: 6px;
                           padding: 8px 18px; font-weight: 600; }}
    QPushButton#Primary:disabled {{ background: {border}; color: {muted}; }}
    QPushButton#Secondary {{ background: {surface}; color: {text}; border: 1px solid {border};
                             border-radius: 6px; padding: 8px 18px; }}
    QPushButton#Secondary:hover {{ background: {hover}; }}
    QLabel#CanvasNote {{ color: {muted}; background: {surface}; border: 1px solid {border};
                         border-radius: 6px; padding: 3px 8px; }}
    QFrame#CanvasControls {{ background: {surface}; border: 1px solid {border}; border-radius: 8px; }}
    QWidget#CanvasBar {{ background: {surface}; border-bottom: 1px solid {border}; }}
    QToolButton#Crumb {{ padding: 2px 6px; color: {accent}; }}
    QToolButton#CrumbCurrent {{ padding: 2px 6px; font-weight: 600; }}
    QLineEdit {{ border: 1px solid {border}; border-radius: 6px; padding: 4px 8px;
                 background: {surface}; }}
    QLineEdit:focus {{ border-color: {accent}; }}
    QFrame#Card {{ background: {surface}; border: 1px solid {border}; border-radius: 10px; }}
    QListWidget#Recents {{ border: none; background: transparent; }}
    QListWidget#Recents::item {{ padding: 6px 4px; border-radius: 6px; }}
    QListWidget#Recents::item:hover {{ background: {hover}; }}
    QDockWidget::title {{ padding: 6px 8px; font-weight: 600; }}
    QTreeView {{ border: none; }}
    QTextBrowser {{ border: none; }}
    QStatusBar {{ color: {muted}; }}
    """
