// A pane's screen as the server sends it (rows of [text, style index] runs) drawn as
// styled spans. Palette colours are CSS classes; hex colours go through the CSSOM.

const PALETTE = new Set(['black', 'red', 'green', 'yellow', 'blue', 'magenta', 'cyan', 'white'].flatMap(
  (name) => [name, 'bright' + name]));
const HEX = /^[0-9a-f]{6}$/i;
const FLAGS = ['bold', 'dim', 'italic', 'underline', 'strikethrough', 'hidden', 'blink'];

/** Apply colour `value` ('default', a palette name or rrggbb) as `side` ('fg'|'bg') of `span`;
 *  `swapped`: reverse video, where a default colour is the other side's default. */
function colour(span, side, value, swapped) {
  if (!value || value === 'default') {
    if (swapped) span.classList.add(side + '-swapped');
  } else if (PALETTE.has(value)) {
    span.classList.add(`${side}-${value}`);
  } else if (HEX.test(value)) {
    span.style[side === 'fg' ? 'color' : 'backgroundColor'] = '#' + value;
  }
}

function run(text, style) {
  const span = document.createElement('span');
  span.textContent = text;
  if (!style) return span;
  const reverse = Boolean(style.reverse);
  colour(span, 'fg', reverse ? style.bg : style.fg, reverse);
  colour(span, 'bg', reverse ? style.fg : style.bg, reverse);
  for (const flag of FLAGS) if (style[flag]) span.classList.add('s-' + flag);
  return span;
}

/** Fill `pre` with `screen`'s rows; a withheld screen leaves a notice instead. */
export function drawScreen(pre, screen) {
  pre.replaceChildren();
  if (!screen) {
    pre.dataset.withheld = '';
    pre.textContent = '(no screen yet)';
    return;
  }
  pre.dataset.withheld = screen.withheld || '';
  if (screen.withheld) {
    const why = screen.withheld === 'secret_input' ? 'it asks for secret input' : screen.withheld;
    pre.textContent = `Screen withheld: ${why}. Look at the terminal itself; nothing of it is sent here.`;
    return;
  }
  const styles = screen.styles || [];
  if (screen.cols) pre.style.setProperty('--cols', String(screen.cols));
  const rows = screen.rows || [];
  rows.forEach((row, index) => {
    const line = document.createElement('span');
    line.className = 'row';
    for (const [text, styleIndex] of row) {
      const style = styles[styleIndex];
      line.append(style && Object.keys(style).length ? run(text, style) : document.createTextNode(text));
    }
    pre.append(line);
    if (index < rows.length - 1) pre.append('\n');
  });
}
