//! Text for the bitmap backend.

use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
    FontTransform,
};

/// The bitmap backend with text drawn here: plotters' ab_glyph text drops each glyph's side
/// bearing and rounds the pen position per glyph, which leaves uneven gaps between letters.
/// This places glyphs at their kerned, fractional positions and blends their coverage.
pub(super) struct Glyphs<'a, B> {
    pub(super) inner: B,
    pub(super) font: ab_glyph::FontRef<'a>,
}

impl<B: DrawingBackend> DrawingBackend for Glyphs<'_, B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.present()
    }
    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        use ab_glyph::{Font, ScaleFont};
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        if !matches!(style.transform(), FontTransform::None) {
            return self.inner.draw_text(text, style, pos);
        }
        // The same scale as plotters' layout estimate, so widths agree with its label areas.
        let font = self.font.as_scaled(style.size() as f32);
        let mut glyphs = Vec::new();
        let (mut x, mut prev) = (0f32, None);
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                x += font.kern(p, id);
            }
            glyphs.push((id, x));
            x += font.h_advance(id);
            prev = Some(id);
        }
        let dx = match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Center => -x / 2.0,
            HPos::Right => -x,
        };
        let (ascent, descent) = (font.ascent(), font.descent());
        let baseline = match style.anchor().v_pos {
            VPos::Top => ascent,
            VPos::Center => (ascent + descent) / 2.0,
            VPos::Bottom => descent,
        };
        let (w, h) = self.get_size();
        let mut px = Vec::new();
        for (id, gx) in glyphs {
            let g = id.with_scale_and_position(
                font.scale(),
                ab_glyph::point(pos.0 as f32 + dx + gx, pos.1 as f32 + baseline),
            );
            if let Some(o) = self.font.outline_glyph(g) {
                let b = o.px_bounds();
                o.draw(|u, v, cov| {
                    let (x, y) = (b.min.x as i32 + u as i32, b.min.y as i32 + v as i32);
                    if cov > 0.0 && x >= 0 && y >= 0 && x < w as i32 && y < h as i32 {
                        px.push(((x, y), cov.min(1.0) as f64));
                    }
                });
            }
        }
        for (p, cov) in px {
            self.inner.draw_pixel(
                p,
                BackendColor {
                    alpha: color.alpha * cov,
                    rgb: color.rgb,
                },
            )?;
        }
        Ok(())
    }
}
